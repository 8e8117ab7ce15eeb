package kv

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Client is a trainer's view of the sharded tables: it splits each call by
// owner (a binary search over the table's Bounds), sends one request per
// remote owner concurrently, serves the shard of its own node directly
// from the local Store meanwhile, and puts the results back in the
// caller's order. Safe for concurrent use.
type Client struct {
	specs map[string]*Spec
	local *Store // nil: no shard on this node
	tr    Transport
}

// NewClient returns a client for tables specs. local, if not nil, is this
// node's Store and serves its own shard without the transport.
func NewClient(specs []Spec, local *Store, tr Transport) (*Client, error) {
	c := &Client{specs: make(map[string]*Spec), local: local, tr: tr}
	var errs []error
	for _, s := range specs {
		if err := s.Validate(); err != nil {
			errs = append(errs, err)
			continue
		}
		s.Bounds = slices.Clone(s.Bounds)
		c.specs[s.Name] = &s
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Client) spec(name string) (*Spec, error) {
	s, ok := c.specs[name]
	if !ok {
		return nil, fmt.Errorf("kv: table %q: %w", name, ErrUnknownTable)
	}
	return s, nil
}

// Dim is the row width of table.
func (c *Client) Dim(table string) (int, error) {
	s, err := c.spec(table)
	if err != nil {
		return 0, err
	}
	return s.Dim, nil
}

// isLocal reports whether part is served by the local store.
func (c *Client) isLocal(part int) bool { return c.local != nil && c.local.part == part }

// split groups ids by owner: group p lists the ids shard p owns and their
// positions in ids.
type split struct {
	ids [][]uint64
	pos [][]int32
}

func splitByOwner(s *Spec, ids []uint64) (split, error) {
	sp := split{ids: make([][]uint64, s.Parts()), pos: make([][]int32, s.Parts())}
	for i, id := range ids {
		p := s.Owner(id)
		if p < 0 {
			return sp, fmt.Errorf("kv: table %q: id %d at position %d: table has %d rows: %w", s.Name, id, i, s.Rows, ErrNotOwner)
		}
		sp.ids[p] = append(sp.ids[p], id)
		sp.pos[p] = append(sp.pos[p], int32(i))
	}
	return sp, nil
}

// fanOut runs f for every part in parts: remote parts on their own
// goroutines, the local part on this one while they are in flight. Errors
// are joined, those several shards gave alike once (see sameOnParts).
func (c *Client) fanOut(parts []int, f func(p int) error) error {
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	localAt := -1
	for i, p := range parts {
		if c.isLocal(p) {
			localAt = i
			continue
		}
		wg.Go(func() { errs[i] = f(p) })
	}
	if localAt >= 0 {
		errs[localAt] = f(parts[localAt])
	}
	wg.Wait()
	return joinShardErrors(parts, errs)
}

// sameOnParts is one error that several shards gave in the same words: a
// step that failed because a trainer left fails on every shard, and
// eight copies of it, one per part, said nothing the first did not.
type sameOnParts struct {
	err   error // the first shard's
	text  string
	parts []int
}

func (e *sameOnParts) Error() string {
	ps := make([]string, len(e.parts))
	for i, p := range e.parts {
		ps[i] = strconv.Itoa(p)
	}
	return "kv: parts " + strings.Join(ps, ", ") + ": " + strings.TrimPrefix(e.text, "kv: ")
}

func (e *sameOnParts) Unwrap() error { return e.err }

// joinShardErrors joins the errors of parts (errs[i] is parts[i]'s, nil
// if it succeeded), each text once: a shard's own error and a remote
// shard's (RemoteError, whose text is the shard's error) compare by that
// text.
func joinShardErrors(parts []int, errs []error) error {
	var out []error
	var same []*sameOnParts
	for i, err := range errs {
		if err == nil {
			continue
		}
		text := err.Error()
		var re *RemoteError
		if errors.As(err, &re) && re.Part == parts[i] {
			text = re.Text
		}
		k := slices.IndexFunc(same, func(s *sameOnParts) bool { return s.text == text })
		if k < 0 {
			same = append(same, &sameOnParts{err: err, text: text, parts: []int{parts[i]}})
			out = append(out, err)
			continue
		}
		same[k].parts = append(same[k].parts, parts[i])
		out[k] = same[k]
	}
	return errors.Join(out...)
}

// Pull appends the rows of ids to dst in the order of ids.
func (c *Client) Pull(ctx context.Context, table string, ids []uint64, dst []float32) ([]float32, error) {
	dst, _, err := c.PullVersion(ctx, table, 0, ids, dst)
	return dst, err
}

// PullVersion is Pull after every shard involved reached minVersion (Sync
// tables); it returns the smallest version among the shards that answered.
func (c *Client) PullVersion(ctx context.Context, table string, minVersion uint64, ids []uint64, dst []float32) ([]float32, uint64, error) {
	s, err := c.spec(table)
	if err != nil {
		return dst, 0, err
	}
	sp, err := splitByOwner(s, ids)
	if err != nil {
		return dst, 0, err
	}
	dim, base := s.Dim, len(dst)
	out := slices.Grow(dst, len(ids)*dim)[:base+len(ids)*dim]
	var parts []int
	for p, g := range sp.ids {
		if len(g) > 0 {
			parts = append(parts, p)
		}
	}
	versions := make([]uint64, s.Parts())
	err = c.fanOut(parts, func(p int) error {
		var rows []float32
		var err error
		if c.isLocal(p) {
			if len(parts) == 1 { // every id is local: pull straight into out
				_, versions[p], err = c.local.PullVersion(ctx, table, minVersion, ids, out[:base])
				return err
			}
			rows, versions[p], err = c.local.PullVersion(ctx, table, minVersion, sp.ids[p], nil)
			if err != nil {
				return err
			}
		} else {
			var resp PullResponse
			req := PullRequest{Table: table, MinVersion: minVersion, IDs: sp.ids[p]}
			if err := c.tr.Pull(ctx, p, &req, &resp); err != nil {
				return err
			}
			if int(resp.Dim) != dim || len(resp.Rows) != len(sp.ids[p])*dim {
				return fmt.Errorf("kv: table %q: part %d answered %d values of dim %d for %d ids of dim %d: %w",
					table, p, len(resp.Rows), resp.Dim, len(sp.ids[p]), dim, ErrShape)
			}
			if resp.Version < minVersion {
				// Every shard of this build waits first (Store.PullVersion);
				// one that does not must not pass old rows for new.
				return fmt.Errorf("kv: table %q: part %d answered version %d, below the %d asked for (a shard of an older build?)",
					table, p, resp.Version, minVersion)
			}
			rows, versions[p] = resp.Rows, resp.Version
		}
		for i, pos := range sp.pos[p] {
			copy(out[base+int(pos)*dim:base+int(pos+1)*dim], rows[i*dim:(i+1)*dim])
		}
		return nil
	})
	if err != nil {
		return dst, 0, err
	}
	v := uint64(0)
	for i, p := range parts {
		if i == 0 || versions[p] < v {
			v = versions[p]
		}
	}
	return out, v, nil
}

// Push sends grads (len(ids)·dim, row after row) to the owners of ids.
// Each shard applies its part atomically; shards are independent, so on
// error some shards may have applied theirs (the error names the others).
// A push to a Sync table is ErrMode before anything is sent, one of no
// ids too: a trainer asks with one whether it may push to a table
// (Python's Embedding, when it is made, rather than at its first step).
func (c *Client) Push(ctx context.Context, table string, ids []uint64, grads []float32) error {
	s, err := c.spec(table)
	if err != nil {
		return err
	}
	if s.Mode == Sync {
		return fmt.Errorf("kv: table %q: push to a sync table, use PushSync: %w", table, ErrMode)
	}
	dim := s.Dim
	if len(grads) != len(ids)*dim {
		return fmt.Errorf("kv: table %q: push of %d ids with %d gradient values, want %d: %w", table, len(ids), len(grads), len(ids)*dim, ErrShape)
	}
	sp, err := splitByOwner(s, ids)
	if err != nil {
		return err
	}
	var parts []int
	for p, g := range sp.ids {
		if len(g) > 0 {
			parts = append(parts, p)
		}
	}
	return c.fanOut(parts, func(p int) error {
		g := grads
		if len(parts) > 1 {
			g = make([]float32, 0, len(sp.ids[p])*dim)
			for _, pos := range sp.pos[p] {
				g = append(g, grads[int(pos)*dim:int(pos+1)*dim]...)
			}
		}
		if c.isLocal(p) {
			return c.local.Push(table, sp.ids[p], g)
		}
		return c.tr.Push(ctx, p, &PushRequest{Table: table, Dim: uint32(dim), IDs: sp.ids[p], Grads: g})
	})
}

// PushSync contributes trainer's gradient of a Sync table (rows·dim
// values, in row order) to step on every shard and blocks until every
// shard applied the averaged update (nil) or one failed. Shards decide
// independently: after an error some may have applied the step and others
// not, and the job should resume from a checkpoint (see doc.go).
func (c *Client) PushSync(ctx context.Context, table string, step uint64, trainer, world int, grads []float32) error {
	return c.PushSyncSession(ctx, table, step, trainer, world, 0, grads)
}

// PushSyncSession is PushSync for the trainer process of session (not 0:
// see Store.PushSyncSession; 0 is PushSync).
func (c *Client) PushSyncSession(ctx context.Context, table string, step uint64, trainer, world int, session uint64, grads []float32) error {
	s, err := c.spec(table)
	if err != nil {
		return err
	}
	if want := s.Rows * uint64(s.Dim); uint64(len(grads)) != want {
		return fmt.Errorf("kv: table %q: sync push of %d values, table holds %d: %w", table, len(grads), want, ErrShape)
	}
	parts := make([]int, s.Parts())
	for p := range parts {
		parts[p] = p
	}
	return c.fanOut(parts, func(p int) error {
		lo, hi := s.Range(p)
		g := grads[lo*uint64(s.Dim) : hi*uint64(s.Dim)]
		if c.isLocal(p) {
			return c.local.PushSyncSession(ctx, table, step, trainer, world, session, g)
		}
		return c.tr.PushSync(ctx, p, &PushSyncRequest{Table: table, Step: step, Trainer: uint32(trainer), World: uint32(world), Grads: g, Session: session})
	})
}

// Leave tells every shard that trainer is gone from every Sync table
// (Store.Leave).
func (c *Client) Leave(ctx context.Context, trainer int) error {
	parts := 0
	for _, s := range c.specs {
		parts = max(parts, s.Parts())
	}
	return c.leave(ctx, parts, "", trainer, 0)
}

// LeaveTable tells the shards of the Sync table named table that trainer
// is gone from it (Store.LeaveTable); other tables' steps are untouched.
func (c *Client) LeaveTable(ctx context.Context, table string, trainer int) error {
	return c.LeaveTableSession(ctx, table, trainer, 0)
}

// LeaveTableSession is LeaveTable for the trainer process of session (0:
// any; see Store.LeaveTableSession).
func (c *Client) LeaveTableSession(ctx context.Context, table string, trainer int, session uint64) error {
	s, err := c.spec(table)
	if err != nil {
		return err
	}
	return c.leave(ctx, s.Parts(), table, trainer, session)
}

// leave sends a LeaveRequest for table ("": every Sync table, and no
// session) to parts 0..parts-1.
func (c *Client) leave(ctx context.Context, parts int, table string, trainer int, session uint64) error {
	all := make([]int, parts)
	for p := range all {
		all[p] = p
	}
	return c.fanOut(all, func(p int) error {
		if c.isLocal(p) {
			if table == "" {
				c.local.Leave(trainer)
			} else {
				c.local.LeaveTableSession(table, trainer, session)
			}
			return nil
		}
		return c.tr.Leave(ctx, p, &LeaveRequest{Trainer: uint32(trainer), Table: table, Session: session})
	})
}
