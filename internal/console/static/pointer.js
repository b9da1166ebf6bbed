// Pretty-printed JSON that knows which line each JSON pointer (RFC 6901)
// starts on, so that the server's validation problems can be shown at the
// value they point to.

function escapeToken(t) { return String(t).replaceAll('~', '~0').replaceAll('/', '~1'); }

/**
 * layout returns the lines of value pretty-printed with two-space indents
 * and a Map from every JSON pointer in it to the index of its first line.
 */
export function layout(value) {
  const lines = [];
  const at = new Map();
  const walk = (v, ptr, indent, prefix, suffix) => {
    at.set(ptr, lines.length);
    const pad = '  '.repeat(indent);
    if (Array.isArray(v) && v.length > 0) {
      lines.push(pad + prefix + '[');
      v.forEach((item, i) => walk(item, `${ptr}/${i}`, indent + 1, '', i < v.length - 1 ? ',' : ''));
      lines.push(pad + ']' + suffix);
    } else if (v && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length > 0) {
      lines.push(pad + prefix + '{');
      const keys = Object.keys(v);
      keys.forEach((k, i) => walk(v[k], `${ptr}/${escapeToken(k)}`, indent + 1, JSON.stringify(k) + ': ', i < keys.length - 1 ? ',' : ''));
      lines.push(pad + '}' + suffix);
    } else {
      lines.push(pad + prefix + JSON.stringify(v) + suffix);
    }
  };
  walk(value, '', 0, '', '');
  return { lines, at };
}

/**
 * lineOf returns the line of pointer, or of its nearest ancestor that
 * exists (a missing required field is reported at its parent object).
 */
export function lineOf(at, pointer) {
  let p = pointer;
  for (;;) {
    if (at.has(p)) return at.get(p);
    if (p === '') return 0;
    p = p.slice(0, p.lastIndexOf('/'));
  }
}
