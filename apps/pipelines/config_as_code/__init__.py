"""Configuration as code: a team's pipelines, stages and span rules as one YAML file.

``parse_document`` validates a file (every error with its line), ``config_apply``
plans and applies it in one transaction, ``config_export`` writes the current
state back in the same format.
"""

from apps.pipelines.config_as_code.apply import (
    PlanChanged,
    config_apply,
    config_apply_text,
    config_preview,
)
from apps.pipelines.config_as_code.document_export import config_export
from apps.pipelines.config_as_code.document_schema import Document, parse_document
from apps.pipelines.config_as_code.errors import ConfigApplyError, ConfigError, ConfigInvalid
from apps.pipelines.config_as_code.steps import Plan

__all__ = [
    "ConfigApplyError",
    "ConfigError",
    "ConfigInvalid",
    "Document",
    "Plan",
    "PlanChanged",
    "config_apply",
    "config_apply_text",
    "config_export",
    "config_preview",
    "parse_document",
]
