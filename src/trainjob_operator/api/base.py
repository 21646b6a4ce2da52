"""The base of every API model: camelCase on the wire, unknown fields kept where Kubernetes embeds types."""

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class ApiModel(BaseModel):
    """A model of our own CRDs: fields the schema does not name are dropped, as the API server prunes them."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="ignore",
        strict=True,
    )

    def to_wire(self) -> dict[str, Any]:
        """The object as the API server would store it: camelCase keys, unset optionals left out."""
        return self.model_dump(exclude_none=True, by_alias=True)


class K8sModel(ApiModel):
    """A Kubernetes type embedded in ours (pod templates, JobSet specs).

    Only the fields the pipeline reads or writes are named; every other field is kept verbatim so a
    runtime round-trips without loss. `k8s_definition` names the OpenAPI definition the CRD generator
    uses for the full structural schema.
    """

    model_config = ConfigDict(extra="allow")
