// Server-Sent Events read by hand (Node has no EventSource): the studio's bench
// and its test read /studio/stream with this.

/** Calls `onEvent` with each event's name ('message' when it has none) and its data
 * (data lines joined by newlines) until the stream ends, or until the request's
 * signal aborts it (a timeout is the usual end, and no error). */
export async function forEachEvent(res: Response, onEvent: (event: string, data: string) => void): Promise<void> {
  const decoder = new TextDecoder();
  let text = '';
  try {
    for await (const chunk of res.body!) {
      text += decoder.decode(chunk as Uint8Array, { stream: true });
      let end: number;
      while ((end = text.indexOf('\n\n')) >= 0) {
        const block = text.slice(0, end);
        text = text.slice(end + 2);
        let event = 'message';
        const data: string[] = [];
        for (const line of block.split('\n')) {
          if (line.startsWith('event: ')) event = line.slice(7);
          else if (line.startsWith('data: ')) data.push(line.slice(6));
        }
        if (data.length > 0) onEvent(event, data.join('\n'));
      }
    }
  } catch (err) {
    if ((err as Error).name !== 'TimeoutError' && (err as Error).name !== 'AbortError') throw err;
  }
}
