# The metastore's default authorization policy (the chart's `authorization.opa`): groups
# to namespace patterns from `policy` (policy.rego, which the chart renders from its
# `authorization.policy` value: the shape of metastore/policy.py's policy file), admins
# may do everything.
#
# metastore asks, with Trino-shaped input (input.context.identity {user, groups},
# input.action.operation):
#   allow: one decision, e.g. ReadExport (no resource)
#   batch: the indices of input.action.filterResources ([{"namespace": {"name": ...}}])
#          allowed, for ReadNamespace, ShowSensitive and WriteNamespace
# `groups` (groups.rego) are the identity's, or the user-info-fetcher's. The chart renames
# the package of all three files to its `authorization.opa.package`.
package metastore

import rego.v1

default allow := false

subjects contains input.context.identity.user

subjects contains concat("", ["group:", group]) if some group in groups

admin if {
	some subject in subjects
	subject in object.get(policy, "admins", [])
}

# The policy's rule list of each operation on namespaces.
rules := {
	"ReadNamespace": object.get(policy, "read", []),
	"ShowSensitive": object.get(policy, "sensitive", []),
	"WriteNamespace": object.get(policy, "write", []),
}

# `*` in a pattern matches any characters (no delimiters), as in the policy file.
may(operation, namespace) if {
	some rule in rules[operation]
	some subject in rule.subjects
	subject in subjects
	some pattern in rule.namespaces
	glob.match(pattern, null, namespace)
}

allow if admin

allow if {
	input.action.operation == "ReadExport"
	some subject in subjects
	subject in object.get(policy, "export", [])
}

allow if may(input.action.operation, input.action.resource.namespace.name)

batch contains index if {
	admin
	some index, _ in input.action.filterResources
}

batch contains index if {
	some index, resource in input.action.filterResources
	may(input.action.operation, resource.namespace.name)
}
