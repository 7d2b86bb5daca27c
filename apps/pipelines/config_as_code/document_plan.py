import hashlib
from dataclasses import dataclass, field

from apps.pipelines.config_as_code.document_schema import Document
from apps.pipelines.config_as_code.errors import ConfigInvalid
from apps.pipelines.config_as_code.reader import Reader
from apps.pipelines.config_as_code.sections import sections
from apps.pipelines.config_as_code.steps import Plan, PlanOptions
from apps.teams.models import Team


@dataclass
class DocumentPlan(Plan):
    """A whole file's plan; its digest also covers the sections' fingerprints."""

    fingerprints: list[str] = field(default_factory=list)

    def digest(self) -> str:
        digest = super().digest()
        if not self.fingerprints:
            return digest
        return hashlib.sha256("\n".join([digest, *self.fingerprints]).encode()).hexdigest()


def plan_document(*, team: Team | None, document: Document, options: PlanOptions) -> Plan:
    """What applying ``document`` would change, section by section; reads only.

    Raises ConfigInvalid when a section refers to something that neither the database
    nor the file provides.
    """
    present = [section for section in sections() if section.key in document.sections]
    reader = Reader()
    for section in present:
        if section.check is not None:
            section.check(team, document.sections[section.key], document.sections, options, reader)
    if reader.errors:
        raise ConfigInvalid(reader.errors)
    plan = DocumentPlan()
    for section in present:
        spec = document.sections[section.key]
        plan.extend(section.plan(team, spec, options))
        fingerprint = section.fingerprint(spec) if section.fingerprint is not None else ""
        if fingerprint:
            plan.fingerprints.append(f"{section.key}:{fingerprint}")
    plan.notes += reader.warnings
    return plan
