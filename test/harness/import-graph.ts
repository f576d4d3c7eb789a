/** Import circles of a graph of files (each file → the files it imports), for the layer guards. */
export function importCircles(graph: ReadonlyMap<string, readonly string[]>): string[] {
  const circles: string[] = [];
  const state = new Map<string, 'open' | 'done'>();
  const path: string[] = [];
  const visit = (f: string): void => {
    state.set(f, 'open');
    path.push(f);
    for (const t of graph.get(f) ?? []) {
      if (state.get(t) === 'open') circles.push([...path.slice(path.indexOf(t)), t].join(' -> '));
      else if (!state.has(t)) visit(t);
    }
    path.pop();
    state.set(f, 'done');
  };
  for (const f of graph.keys()) if (!state.has(f)) visit(f);
  return circles;
}
