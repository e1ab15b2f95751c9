"""Issue 30: keep-alive connections are spread over the workers (query.workers.Balancer)."""

import asyncio

from query.workers import Balancer, bind


async def _answer(scope, receive, send):
    await send({"type": "http.response.start", "status": 200, "headers": [(b"x", b"1")]})
    await send({"type": "http.response.body", "body": b"ok"})


def _headers(balancer: Balancer, slot: int) -> list[tuple[bytes, bytes]]:
    sent = []

    async def send(message):
        sent.append(message)

    balancer.slot = slot
    asyncio.run(balancer(_answer)({"type": "http"}, None, send))
    return sent[0]["headers"]


def test_a_worker_busier_than_the_idlest_by_two_asks_the_client_to_reconnect():
    balancer = Balancer(2)
    assert _headers(balancer, 0) == [(b"x", b"1")]  # alone: keep the connection
    balancer._counts[0] = 2  # two more requests in flight here, none on worker 1
    assert (b"connection", b"close") in _headers(balancer, 0)
    assert _headers(balancer, 1) == [(b"x", b"1")]  # the idle worker keeps its own
    assert balancer._counts[0] == 2 and balancer._counts[1] == 0  # counts restored
    balancer.reset(0)
    assert _headers(balancer, 0) == [(b"x", b"1")]


def test_the_listening_socket_says_tcp_so_answers_are_not_delayed_by_nagle():
    import socket

    sock = bind("127.0.0.1", 0)
    try:
        assert sock.proto == socket.IPPROTO_TCP  # asyncio sets TCP_NODELAY only then
    finally:
        sock.close()
