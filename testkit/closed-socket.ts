// A request sent on a kept-alive connection the server closed as idle just then fails as "other side closed"
// before any answer (Node's server closes at 5 s, undici keeps one 4 s; llama-server closes at 5 s too). For a
// request the server never read, the test or the bench sends it again on another connection.

/** `send()`, sent again (up to `tries` in all) while it fails on a socket the server closed. */
export async function againOnClosedSocket(send: () => Promise<Response>, tries = 2): Promise<Response> {
  for (let i = 1; ; i++) {
    try {
      return await send();
    } catch (err) {
      if (i >= tries || (err as { cause?: { code?: string } }).cause?.code !== "UND_ERR_SOCKET") throw err;
    }
  }
}
