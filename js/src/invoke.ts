// Commands to the kernel (`_histogram`, `_region`, `_locate`) over the widget's own custom
// messages, in anywidget's `@command` protocol. Sent with `model.send`, part of every host's
// model, because `experimental.invoke` is not everywhere: marimo's throws "not supported".

import type { AnyModel } from "@anywidget/types";

export type Invoke = <T>(name: string, msg: unknown, options?: { signal?: AbortSignal }) => Promise<[T, DataView[]]>;

interface Reply {
  id?: unknown;
  kind?: unknown;
  response?: unknown;
}

let sent = 0;

/** `invoke(name, msg)` resolves with the command's response and buffers, or rejects when `signal` aborts. */
export function commandInvoker(model: Pick<AnyModel, "on" | "off" | "send">): Invoke {
  const prefix = Math.random().toString(36).slice(2); // two views of one model must not take each other's replies
  return <T>(name: string, msg: unknown, { signal }: { signal?: AbortSignal } = {}) =>
    new Promise<[T, DataView[]]>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      const id = `nbi-${prefix}-${sent++}`;
      const finish = () => {
        model.off("msg:custom", onReply);
        signal?.removeEventListener("abort", onAbort);
      };
      const onReply = (reply: Reply, buffers: DataView[]) => {
        if (reply?.id !== id || reply.kind !== "anywidget-command-response") return;
        finish();
        resolve([reply.response as T, buffers ?? []]);
      };
      const onAbort = () => {
        finish();
        reject(signal?.reason);
      };
      model.on("msg:custom", onReply);
      signal?.addEventListener("abort", onAbort);
      model.send({ id, kind: "anywidget-command", name, msg });
    });
}
