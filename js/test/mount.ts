// The widget rendered in jsdom against a fake anywidget model, for every test that mounts it.

import type { AnyModel } from "@anywidget/types";
import widget, { type Traits } from "../src/index";
import type { Payload } from "../src/payload";

/** The part of an anywidget model the widget uses: traits, save_changes and change handlers. */
export class FakeModel {
  saved = 0;
  handlers = new Map<string, () => void>();
  constructor(public state: Traits) {}
  get<K extends keyof Traits>(key: K): Traits[K] {
    return this.state[key];
  }
  set<K extends keyof Traits>(key: K, value: Traits[K]) {
    this.state[key] = value;
  }
  save_changes() {
    this.saved++;
  }
  on(event: string, cb: () => void) {
    this.handlers.set(event, cb);
  }
  off(event?: string | null) {
    if (event) this.handlers.delete(event);
  }
  /** What Python changing a trait does: set it, then run the widget's handler for it. */
  change<K extends keyof Traits>(key: K, value: Traits[K]) {
    this.state[key] = value;
    const handler = this.handlers.get(`change:${key}`);
    if (!handler) throw new Error(`the widget does not listen to change:${key}`);
    handler();
  }
}

const cleanups: (() => void)[] = [];

/** Renders the widget for `payload` into a new element in the document. */
export function mount(payload: Payload, selected: string | null = null): { model: FakeModel; el: HTMLElement } {
  const model = new FakeModel({ payload, selected });
  const el = document.createElement("div");
  document.body.append(el);
  cleanups.push(widget.render({ model: model as unknown as AnyModel<Traits>, el }));
  return { model, el };
}

/** Runs the cleanup of every widget mounted so far and empties the document (for afterEach). */
export function unmountAll(): void {
  for (const cleanup of cleanups.splice(0)) cleanup();
  document.body.replaceChildren();
}
