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

export function createEditor(parent: HTMLElement, doc: string, label: string): Editor {
  const view = new EditorView({
    doc,
    parent,
    extensions: [basicSetup, yaml(), EditorView.contentAttributes.of({ 'aria-label': label }), EditorView.lineWrapping],
  });
  return { value: () => view.state.doc.toString(), destroy: () => view.destroy() };
}
