"""The two sections this app adds to the configuration file, in the order they apply:
channels after pipelines, alerts after channels (a rule names both)."""

from apps.alerts.config_as_code.alerts_export import export_alerts
from apps.alerts.config_as_code.alerts_plan import plan_alerts
from apps.alerts.config_as_code.alerts_schema import parse_alerts
from apps.alerts.config_as_code.channels_check import check_channels
from apps.alerts.config_as_code.channels_export import export_channels
from apps.alerts.config_as_code.channels_plan import fingerprint_channels, plan_channels
from apps.alerts.config_as_code.channels_schema import parse_channels
from apps.alerts.config_as_code.references import check_alerts
from apps.pipelines.config_as_code.sections import Section, section_register

CHANNELS = Section(
    "channels",
    parse_channels,
    plan_channels,
    export_channels,
    check=check_channels,
    fingerprint=fingerprint_channels,
)
ALERTS = Section(
    "alerts", parse_alerts, plan_alerts, lambda team, _: export_alerts(team), check=check_alerts
)


def sections_register() -> None:
    section_register(CHANNELS, after="pipelines")
    section_register(ALERTS, after="channels")
