# The groups a principal is in: those its identity carries (a named token's groups, an
# OIDC token's groups claim).
package metastore

import rego.v1

groups := object.get(input.context.identity, "groups", [])
