/**
 * The compose editor: CodeMirror 6 with YAML, in a chunk of its own that only the deployment page's editor loads
 * (`import('./editor.js')`), so the first screen never downloads it.
 */
import { basicSetup, EditorView } from 'codemirror';
import { yaml } from '@codemirror/lang-yaml';

export interface Editor {
  value(): string;
  destroy(): void;
}

export function createEditor(host: HTMLElement, doc: string, label: string): Editor {
  // In a shadow root, CodeMirror's styles go to a constructed style sheet (adoptedStyleSheets); in the document they
  // would be a <style> element, which the console's CSP (no inline styles) refuses.
  const root = host.shadowRoot ?? host.attachShadow({ mode: 'open' });
  const view = new EditorView({
    doc,
    parent: root,
    root,
    extensions: [basicSetup, yaml(), EditorView.contentAttributes.of({ 'aria-label': label }), EditorView.lineWrapping],
  });
  return { value: () => view.state.doc.toString(), destroy: () => view.destroy() };
}
