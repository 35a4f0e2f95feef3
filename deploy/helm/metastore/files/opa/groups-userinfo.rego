# The groups a principal is in, resolved by the Stackable user-info-fetcher (its groups'
# names, without a leading `/` that Keycloak adds), and the identity's own.
package metastore

import rego.v1

fetched contains trim_prefix(group, "/") if {
	some group in data.stackable.opa.userinfo.v1.userInfoByUsername(input.context.identity.user).groups
}

groups := fetched | {group | some group in object.get(input.context.identity, "groups", [])}
