// The anywidget entry point: render an InspectWidget's payload and keep `selected` in sync.

import type { AnyWidget, RenderProps } from "@anywidget/types";
import type { HistFetcher } from "./detail";
import { h } from "./dom";
import type { LocateFetcher, LocateRow, RegionFetcher, RegionHeader } from "./heatmapRegion";
import { commandInvoker, type Invoke } from "./invoke";
import { type Hist, PAYLOAD_VERSION, type Payload } from "./payload";
import { JP } from "./styles";
import { Timeline } from "./timeline";
import { TreeView } from "./view";

/** InspectWidget's synced traits (nbinspect/widget.py). */
export interface Traits {
  /** JSON bytes from a kernel (one binary buffer: DataView), the object itself on a static page. */
  payload: Payload | DataView;
  /** A dotted path ('' is the root module), or null when nothing is selected. */
  selected: string | null;
}

/** What render needs: a standalone page has no kernel, so no `experimental` (and no commands). */
export type Props = Pick<RenderProps<Traits>, "model" | "el"> & Partial<Pick<RenderProps<Traits>, "experimental">>;

/** Histograms from the kernel's `_histogram` command, cached; none on a static page. */
function fetcher(invoke: Invoke | undefined): HistFetcher | undefined {
  if (!invoke) return undefined;
  const cache = new Map<string, Promise<Hist | null>>();
  return (name, kind) => {
    const key = `${kind}:${name}`;
    let hit = cache.get(key);
    if (!hit) {
      hit = invoke<Hist | null>("_histogram", { name, kind }, { signal: AbortSignal.timeout(15000) }).then(
        ([response]) => response,
      );
      hit.catch(() => cache.delete(key));
      cache.set(key, hit);
    }
    return hit;
  };
}

/** The value view's region and locate requests (`_region`, `_locate`); none on a static page. */
function valueFetchers(invoke: Invoke | undefined): { region?: RegionFetcher; locate?: LocateFetcher } {
  if (!invoke) return {};
  const signal = () => AbortSignal.timeout(15000); // the first region may load numba (~0.5 s) and read a file
  return {
    region: (req) => invoke<RegionHeader>("_region", req, { signal: signal() }),
    locate: (tensor, side) =>
      invoke<LocateRow[] | null>("_locate", { tensor, side }, { signal: signal() }).then(([rows]) => rows ?? []),
  };
}

const decoded = new WeakMap<DataView, Payload>();

/** The payload a trait holds: parsed from the kernel's JSON bytes (once per value), or as it is. */
export function payloadOf(value: Payload | DataView | undefined): Payload | undefined {
  if (!(value instanceof DataView)) return value;
  let payload = decoded.get(value);
  if (!payload) {
    payload = JSON.parse(new TextDecoder().decode(value)) as Payload;
    decoded.set(value, payload);
  }
  return payload;
}

/** Why this front-end cannot show `payload`, or null when it can. */
export function incompatible(payload: Payload | undefined): string | null {
  const version = payload?.version;
  if (version === PAYLOAD_VERSION) return null;
  return (
    `nbinspect: this widget reads payload version ${PAYLOAD_VERSION} but was sent version ${String(version)}. ` +
    "The Python package and the front-end bundle come from different nbinspect versions: " +
    "reinstall nbinspect (in a checkout, run `make js`) and restart the kernel."
  );
}

function render({ model, el, experimental }: Props): () => void {
  const error = h("div", "nbi-error", undefined, { role: "alert", style: `color: ${JP.error1}` });
  let view: TreeView | null = null;
  const invoke = experimental ? commandInvoker(model) : undefined;
  const timeline = new Timeline(el); // metrics over training steps (nbinspect.track), above the tree
  const show = () => {
    const payload = payloadOf(model.get("payload"));
    const problem = incompatible(payload);
    error.textContent = problem ?? "";
    timeline.update(problem ? undefined : payload?.timeline);
    if (problem || !payload) {
      view?.destroy();
      view = null;
      el.append(error);
    } else if (view) view.setPayload(payload);
    else {
      error.remove();
      view = new TreeView(el, payload, {
        onSelect(path) {
          model.set("selected", path);
          model.save_changes();
        },
        fetchHist: fetcher(invoke),
        values: valueFetchers(invoke),
      });
      view.selectPath(model.get("selected"));
    }
  };
  show();
  const onSelected = () => view?.selectPath(model.get("selected"));
  model.on("change:payload", show);
  model.on("change:selected", onSelected);
  return () => {
    model.off("change:payload", show);
    model.off("change:selected", onSelected);
    view?.destroy();
    error.remove();
    timeline.root.remove();
  };
}

export default { render } satisfies AnyWidget<Traits>;
