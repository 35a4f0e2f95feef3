"""The lineage diff's breaking schema changes and the fields downstream they reach.

A module of its own (models_lineage.SchemaChange embeds it) that imports no other model: a
dependent field is named by its dataset's id and display name, as a ColumnRef's are.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Literal

from msgspec import Meta, Struct


class DependentField(Struct):
    """A field derived, directly or through others, from a changed field."""

    dataset_id: Annotated[
        uuid.UUID | None, Meta(description="Its dataset (null: a name no event named).")
    ]
    namespace: Annotated[str, Meta(description="Namespace of its dataset's display name.")]
    name: Annotated[str, Meta(description="Its dataset's display name.")]
    field: str
    depth: Annotated[int, Meta(ge=1, description="Field hops from the changed field.")]


class BreakingChange(Struct):
    """A change to a field that can break its readers, and what it reaches downstream."""

    field: Annotated[str, Meta(description="The field's path (nested fields as `parent.child`).")]
    change: Annotated[
        Literal["removed", "narrowed", "type_changed", "made_required"],
        Meta(
            description="`removed`; `narrowed`: a widening reversed (`bigint` -> `int`, "
            "`double` -> `real`, fewer decimal digits); `type_changed`: a type that does not "
            "hold the old one's values (`string` -> `int`); `made_required`: `nullable` "
            "true (or absent) became false. The rules: `/lineage/diff`'s description."
        ),
    ]
    from_type: Annotated[str | None, Meta(description="Its type at `from`.")]
    to_type: Annotated[str | None, Meta(description="Its type at `to` (null: removed).")]
    reaches: Annotated[
        list[DependentField],
        Meta(
            description="The fields downstream of it by column lineage as of `to`, nearest "
            "first, within `depth` field hops (the walk of `/impact?node=field:...`)."
        ),
    ]
    reaches_truncated: Annotated[
        bool, Meta(description="True when the walk stopped at its limits before `depth`.")
    ]
