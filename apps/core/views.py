from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from apps.core.health import readiness_checks


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


@never_cache
@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    results = {name: check() for name, check in readiness_checks().items()}
    body = {
        "status": "ok" if all(error is None for error in results.values()) else "unavailable",
        "checks": {
            name: {"ok": error is None, **({"error": error} if error else {})}
            for name, error in results.items()
        },
    }
    return JsonResponse(body, status=200 if body["status"] == "ok" else 503)
