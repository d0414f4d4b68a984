"""A tornado server whose one endpoint echoes a JSON body: the floor of an HTTP hop to a second
Python process on the gateway's own web stack, without Jupyter Server, auth or a kernel.

Run: `python bench/echo_http_server.py PORT` (it serves POST /api/loomgate/echo on 127.0.0.1).
"""

from __future__ import annotations

import asyncio
import sys

from tornado import web


class Echo(web.RequestHandler):
    """POST: answer the request body as it came."""

    def post(self) -> None:
        """Return the body unchanged, as JSON."""
        self.set_header("Content-Type", "application/json")
        self.finish(self.request.body)


async def main(port: int) -> None:
    """Serve until killed; print "serving" once listening."""
    app = web.Application([(r"/api/loomgate/echo", Echo)])
    app.listen(port, address="127.0.0.1")
    print("serving", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
