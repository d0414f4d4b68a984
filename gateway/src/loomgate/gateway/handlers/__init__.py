"""loomgate's endpoints under /api/loomgate/: the route table, the call and its answer, and
the two ways in (HTTP, one handler per route; the rpc websocket), mounted by routes."""
