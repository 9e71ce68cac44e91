// The Host header's syntax (RFC 9112 §3.2, RFC 3986 §3.2.2): shared by the data plane's front and the admin API.

/** reg-name characters: unreserved and sub-delims (pct-encoded is checked apart). */
const REG_NAME = new Uint8Array(128);
for (const c of "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=") REG_NAME[c.charCodeAt(0)] = 1;
/** Inside an IP-literal's brackets: IPv6address and IPvFuture (unreserved, sub-delims and ':'); a superset check, the address's shape is not ours to judge. */
const IP_LITERAL = REG_NAME.slice();
IP_LITERAL[58] = 1;

function isHex(c: number): boolean {
  return (c >= 48 && c <= 57) || (c >= 65 && c <= 70) || (c >= 97 && c <= 102);
}

/**
 * Whether `v` is a valid Host field value: `uri-host [ ":" port ]`, where uri-host is an IP-literal
 * in brackets, an IPv4 address or a reg-name (percent-encoding allowed). An empty value is valid
 * (RFC 9112 §3.2: a target without an authority is sent with an empty Host).
 */
export function isValidHost(v: string): boolean {
  const n = v.length;
  let i = 0;
  if (n > 0 && v.charCodeAt(0) === 91) {
    const close = v.indexOf(']');
    if (close < 2) return false;
    for (let k = 1; k < close; k++) if (IP_LITERAL[v.charCodeAt(k)] !== 1) return false;
    i = close + 1;
  } else {
    for (; i < n; i++) {
      const c = v.charCodeAt(i);
      if (c === 58) break;
      if (c === 37) {
        if (i + 2 >= n || !isHex(v.charCodeAt(i + 1)) || !isHex(v.charCodeAt(i + 2))) return false;
        i += 2;
      } else if (REG_NAME[c] !== 1) return false;
    }
  }
  if (i === n) return true;
  if (v.charCodeAt(i) !== 58) return false;
  for (i++; i < n; i++) {
    const c = v.charCodeAt(i);
    if (c < 48 || c > 57) return false;
  }
  return true;
}
