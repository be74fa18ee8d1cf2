// The widget's commands travel as anywidget's command protocol over the model's own custom
// messages: each reply reaches the call that asked for it, and an aborted call stops listening.

import { describe, expect, it } from "vitest";
import { commandInvoker } from "../src/invoke";

type Listener = (msg: unknown, buffers: DataView[]) => void;

/** A model as a host gives it: `send` to the kernel, `msg:custom` back; `sent` is what went out. */
function fakeModel() {
  const listeners = new Set<Listener>();
  const sent: { id: string; kind: string; name: string; msg: unknown }[] = [];
  return {
    sent,
    listeners,
    on: (_event: string, f: Listener) => void listeners.add(f),
    off: (_event?: string | null, f?: Listener | null) => void (f && listeners.delete(f)),
    send: (content: (typeof sent)[number]) => void sent.push(content),
    reply(id: string, response: unknown, buffers: DataView[] = [], kind = "anywidget-command-response") {
      for (const f of [...listeners]) f({ id, kind, response }, buffers);
    },
  };
}

describe("commandInvoker", () => {
  it("sends anywidget's command message and resolves each call with its own reply", async () => {
    const model = fakeModel();
    const invoke = commandInvoker(model);
    const first = invoke<string>("_region", { tensor: "w" });
    const second = invoke<string>("_locate", { tensor: "w", side: "a" });
    expect(model.sent.map(({ kind, name, msg }) => ({ kind, name, msg }))).toEqual([
      { kind: "anywidget-command", name: "_region", msg: { tensor: "w" } },
      { kind: "anywidget-command", name: "_locate", msg: { tensor: "w", side: "a" } },
    ]);
    const [a, b] = model.sent.map((m) => m.id);
    expect(a).not.toEqual(b);
    const buffer = new DataView(new ArrayBuffer(4));
    model.reply("someone-else", "not ours"); // another widget's reply on a shared channel
    model.reply(b, "located", [], "something-else"); // not a command response
    model.reply(b, "located");
    model.reply(a, "region", [buffer]);
    expect(await first).toEqual(["region", [buffer]]);
    expect(await second).toEqual(["located", []]);
    expect(model.listeners.size).toBe(0); // answered calls stop listening
  });

  it("two invokers on one model never take each other's replies", async () => {
    const model = fakeModel();
    const one = commandInvoker(model)("_histogram", {});
    const two = commandInvoker(model)("_histogram", {});
    expect(model.sent[0].id).not.toEqual(model.sent[1].id);
    model.reply(model.sent[1].id, 2);
    model.reply(model.sent[0].id, 1);
    expect([(await one)[0], (await two)[0]]).toEqual([1, 2]);
  });

  it("rejects on abort and stops listening; an already aborted signal sends nothing", async () => {
    const model = fakeModel();
    const controller = new AbortController();
    const call = commandInvoker(model)("_region", {}, { signal: controller.signal });
    expect(model.listeners.size).toBe(1);
    controller.abort(new Error("timed out"));
    await expect(call).rejects.toThrow("timed out");
    expect(model.listeners.size).toBe(0);
    const late = commandInvoker(model)("_region", {}, { signal: controller.signal });
    await expect(late).rejects.toThrow("timed out");
    expect(model.sent).toHaveLength(1);
  });
});
