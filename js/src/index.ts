// The anywidget entry point: render an InspectWidget's payload and keep `selected` in sync.

import { Timeline, type TimelineData } from "./timeline";
import type { Hist, HistFetcher, Payload, WidgetModel } from "./types";
import { TreeView } from "./view";

/** nbinspect.track adds metrics over steps to the payload (optional field). */
const timelineOf = (payload: Payload) => (payload as Payload & { timeline?: TimelineData }).timeline;

type Invoke = (name: string, msg: unknown, options?: { signal?: AbortSignal }) => Promise<[unknown, unknown]>;

export interface RenderProps {
  model: WidgetModel;
  el: HTMLElement;
  experimental?: { invoke: Invoke };
}

/** Histograms from the kernel's `_histogram` command, cached; none on a static page. */
function fetcher(invoke: Invoke | undefined): HistFetcher | undefined {
  if (!invoke) return undefined;
  const cache = new Map<string, Promise<Hist | null>>();
  return (name, kind) => {
    const key = `${kind}:${name}`;
    let hit = cache.get(key);
    if (!hit) {
      hit = invoke("_histogram", { name, kind }, { signal: AbortSignal.timeout(15000) }).then(([response]) => response as Hist | null);
      hit.catch(() => cache.delete(key));
      cache.set(key, hit);
    }
    return hit;
  };
}

function render({ model, el, experimental }: RenderProps): () => void {
  const timeline = new Timeline(el);
  timeline.update(timelineOf(model.get("payload")));
  const view = new TreeView(el, model.get("payload") as Payload, {
    onSelect(path) {
      model.set("selected", path);
      model.save_changes();
    },
    fetchHist: fetcher(experimental?.invoke),
  });
  view.selectPath(model.get("selected"));
  const onPayload = () => {
    timeline.update(timelineOf(model.get("payload")));
    view.setPayload(model.get("payload"));
  };
  const onSelected = () => view.selectPath(model.get("selected"));
  model.on("change:payload", onPayload);
  model.on("change:selected", onSelected);
  return () => {
    model.off("change:payload", onPayload);
    model.off("change:selected", onSelected);
    view.destroy();
    timeline.root.remove();
  };
}

export default { render };
