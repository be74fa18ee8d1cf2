// The DOM helpers every part of the view builds with. Text is always set as text, never as
// markup, so names from a model cannot inject HTML.

const SVG = "http://www.w3.org/2000/svg";

/** An HTML element with a class (may be ""), optional text and attributes. */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  cls = "",
  text?: string,
  attrs: Record<string, string> = {},
): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  return e;
}

/** An SVG element with attributes. */
export function svg<K extends keyof SVGElementTagNameMap>(
  tag: K,
  attrs: Record<string, string | number> = {},
): SVGElementTagNameMap[K] {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  return e;
}

/** A button that runs `onClick`. */
export function button(cls: string, text: string, onClick: () => void): HTMLButtonElement {
  const b = h("button", cls, text, { type: "button" });
  b.addEventListener("click", onClick);
  return b;
}
