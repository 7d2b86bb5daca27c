from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from django.views.defaults import page_not_found

from apps.core.health import readiness_checks
from apps.core.quarantine import quarantine_counts, quarantine_latest


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


@never_cache
@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    results = {name: check() for name, check in readiness_checks().items()}
    # An exception's text names hosts, ports and users: staff see it, anyone else
    # (a load balancer, a stranger) sees only which checks fail.
    staff = results.get("database") is None and _is_staff(request)
    body: dict[str, object] = {
        "status": "ok" if all(error is None for error in results.values()) else "unavailable",
        "checks": {
            name: {"ok": error is None, **({"error": error} if error and staff else {})}
            for name, error in results.items()
        },
    }
    if staff:
        # Items the shared passes set aside: not a readiness failure (every other
        # team's work goes on), but what an operator looks at first.
        body["quarantine"] = {
            "held": quarantine_counts(),
            "latest": [
                {
                    "kind": item.kind,
                    "id": item.item_id,
                    "team_id": item.team_id,
                    "times": item.times,
                    "at": item.last_quarantined_at.isoformat(),
                    "reason": item.reason,
                }
                for item in quarantine_latest()
            ],
        }
    return JsonResponse(body, status=200 if body["status"] == "ok" else 503)


def _is_staff(request: HttpRequest) -> bool:
    """Whether a signed-in staff user asks; reading the session needs the database."""
    try:
        return bool(request.user.is_staff)
    except DatabaseError:
        return False


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """A path no URL matches: the API's error body under /api/, where clients parse JSON
    (a slug with other characters than a slug's never reaches an API view)."""
    if request.path.startswith("/api/"):
        return JsonResponse({"error": {"code": "not_found", "message": "Not found."}}, status=404)
    return page_not_found(request, exception)
