package providerdata

import (
	"sync"

	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

// Replacements remembers, for one provider process, which rollout or assignment key a planned
// create replaces. Terraform plans a replacement in two calls to the same process: first with
// the prior state (where a resource sees the rename, or that it exists at all), then as a
// create with no prior state. The second call cannot tell a replacement from a second
// workspace creating what another one manages; this tells it. The prior is destroyed before
// the new one applies, so its records and claims do not count against the create.
type Replacements struct{ m sync.Map }

// Note records that planning key (a create to come) replaces prior; prior may equal key
// (unused today: a plan cannot tell a `-replace` from a second workspace).
func (r *Replacements) Note(key, prior records.Key) {
	if r != nil {
		r.m.Store(key, prior)
	}
}

// Of returns the key that key's create replaces, if an earlier plan call noted one.
func (r *Replacements) Of(key records.Key) (records.Key, bool) {
	if r == nil {
		return records.Key{}, false
	}
	v, ok := r.m.Load(key)
	if !ok {
		return records.Key{}, false
	}
	prior, ok := v.(records.Key)
	return prior, ok
}
