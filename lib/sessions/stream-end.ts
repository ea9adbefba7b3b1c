/** `response` with its body passed through as it is, calling `onEnd` once the body has ended or broken (not when its reader cancels it). */
export function watchStreamEnd(response: Response, onEnd: () => void): Response {
  const body = response.body;
  if (body === null) return response;
  const reader = body.getReader();
  const watched = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done, value } = await reader.read();
        if (done) {
          controller.close();
          onEnd();
          return;
        }
        controller.enqueue(value);
      } catch (err) {
        controller.error(err);
        onEnd();
      }
    },
    cancel: (reason) => reader.cancel(reason),
  });
  return new Response(watched, { status: response.status, statusText: response.statusText, headers: response.headers });
}
