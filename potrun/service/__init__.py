"""`potrun serve`: the sandbox over HTTP, for trainers and tools that call one (docs/service.md).

- `app.py`: the ASGI app (Starlette): SandboxFusion's `POST /run_code`, potrun's `POST /v1/run` and
  `POST /v1/score`, OpenRLHF's remote reward at `POST /openrlhf/reward`, `GET /health`, `GET /metrics`;
  one warm Sandbox per process, a bearer token, a request size limit.
- `fusion.py`: SandboxFusion's request and response, read and written (its fields and status words).
- `admission.py`: the bounded queue of programs in flight, whose back-pressure is a 429.
- `metrics.py`: the counters `GET /metrics` renders as Prometheus text.

Needs the `serve` extra: `pip install 'potrun[serve]'` (starlette and uvicorn).
"""

from potrun.service.app import ServiceConfig, make_app
from potrun.service.server import check_exposure, serve

__all__ = ["ServiceConfig", "check_exposure", "make_app", "serve"]
