// Plain HTTP calls to a double started with tls: false, as a client with a bearer token.
export interface Reply<T = Record<string, unknown>> {
  status: number;
  body: T;
}

export async function call<T = Record<string, unknown>>(
  base: string,
  token: string | undefined,
  method: string,
  path: string,
  body?: unknown,
  contentType = 'application/json',
): Promise<Reply<T>> {
  const headers: Record<string, string> = { Accept: 'application/json' };
  if (token !== undefined) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers['Content-Type'] = contentType;
  const response = await fetch(`${base}${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: (text === '' ? {} : JSON.parse(text)) as T };
}
