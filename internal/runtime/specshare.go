package runtime

import (
	"crypto/sha256"
	"encoding/json"
	"runtime"
	"sync"
	"weak"

	"github.com/agentd/agentd/internal/spec"
)

// specShare shares decoded specs between the chats of a replica whose
// stored specs are the same bytes. Chats are often made from one template,
// and a decoded spec (agents, system messages, models and their scripts) is
// several KB that each running chat, most of its life waiting on a model,
// would otherwise hold a copy of. A spec is never changed once decoded: the
// state, its steps and the model calls only read it, so one copy serves
// every chat. Entries are weak: a spec that no chat uses any more is
// collected, and its entry goes with it.
type specShare struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]weak.Pointer[spec.Spec]
}

func newSpecShare() *specShare {
	return &specShare{m: map[[sha256.Size]byte]weak.Pointer[spec.Spec]{}}
}

// decode returns the spec stored as raw: the shared copy if there is one,
// else a new one, shared from then on. A spec that does not decode is
// returned as far as it decoded, with the error, and not shared.
func (s *specShare) decode(raw []byte) (*spec.Spec, error) {
	key := sha256.Sum256(raw)
	s.mu.Lock()
	sp := s.m[key].Value()
	s.mu.Unlock()
	if sp != nil {
		return sp, nil
	}
	sp = new(spec.Spec)
	if err := json.Unmarshal(raw, sp); err != nil {
		return sp, err
	}
	return s.share(key, sp), nil
}

// share returns the shared spec of the stored bytes whose SHA-256 is key:
// the one already shared, else sp, which is shared from then on. sp must be
// what those bytes decode to.
func (s *specShare) share(key [sha256.Size]byte, sp *spec.Spec) *spec.Spec {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.m[key].Value(); old != nil {
		return old
	}
	s.m[key] = weak.Make(sp)
	runtime.AddCleanup(sp, s.drop, key)
	return sp
}

// drop removes the entry of a collected spec, unless a newer spec took its
// place in the meantime.
func (s *specShare) drop(key [sha256.Size]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w, ok := s.m[key]; ok && w.Value() == nil {
		delete(s.m, key)
	}
}
