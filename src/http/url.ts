// URLs in what Glidepath records or shows (webhooks, weight sources): never their credentials.

/** Hide user:password and query strings (tokens often live there) in anything recorded. */
export function redactUrl(u: string): string {
  try {
    const url = new URL(u);
    url.username = '';
    url.password = '';
    url.search = '';
    url.hash = '';
    return url.toString();
  } catch {
    return '(invalid url)';
  }
}
