"""The health server (`controller/healthserver.py`): on port 0 it reports the port it got."""

import asyncio


def test_the_health_server_on_port_0_reports_the_port_it_got() -> None:
    """Reads aiohttp's private `TCPSite._server` (docs/architecture.md, 'Other libraries' private behaviour')."""
    import aiohttp

    from trainjob_operator.controller.healthserver import HealthServer
    from trainjob_operator.metrics import Metrics

    async def scenario() -> tuple[int, int]:
        server = HealthServer("127.0.0.1", 0, Metrics(), lambda: (True, "ok"), lambda: (True, "ok"))
        port = await server.start()
        try:
            async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/healthz") as resp:
                return port, resp.status
        finally:
            await server.stop()

    port, status = asyncio.run(scenario())
    assert (port > 0, status) == (True, 200)
