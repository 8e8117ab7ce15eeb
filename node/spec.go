package node

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"graphnode/csr"
	"graphnode/mesh"
	"graphnode/node/control"
)

// SamplerSpec is what the node tells one sampler subprocess, as JSON on
// its stdin: which partition to map, which ring and sub-ring to produce
// into, and the loader's options (defaults resolved by the node).
type SamplerSpec struct {
	Part string `json:"part"` // partition file (part.csr)
	// PartFD, when not 0, is the node's open descriptor of Part, which
	// the sampler inherits (startProc): it maps the inode the node
	// opened and checked, even once another file has been renamed over
	// Part. 0: the sampler opens Part by path.
	PartFD int `json:"part_fd,omitempty"`
	// PartID is the file the node opened and checked; the sampler
	// refuses any other (openPart).
	PartID csr.Identity `json:"part_id"`
	// CrashFD, when not 0, is the descriptor of the pipe the node reads
	// the sampler's crash report from (SetSamplerCrashOutput).
	CrashFD   int                   `json:"crash_fd,omitempty"`
	Ring      string                `json:"ring"` // ring file, created by the node
	LoaderID  uint64                `json:"loader_id"`
	Worker    int                   `json:"worker"`  // w: the sub-ring, and batches w, w+W, …
	Workers   int                   `json:"workers"` // W
	Options   control.LoaderOptions `json:"options"`
	LogLevel  string                `json:"log_level"`
	LogFormat string                `json:"log_format"`
	// Seeds are the loader's seeds when they span several parts (the
	// node gathered the split from its peers, or they are the trainer's
	// seed_ids, then left out of Options); nil: the sampler reads them
	// from its own partition.
	Seeds []uint64 `json:"seeds,omitempty"`
	// Mesh is how to reach the other parts; nil with a single part.
	Mesh *SamplerMesh `json:"mesh,omitempty"`
}

// SamplerMesh is the mesh client of a sampler: the node's identity and
// peers, and the partition book that routes ids to them.
type SamplerMesh struct {
	// Identity is the node's, as it loaded it at its start, private key
	// included: a sampler dials as its node, whatever the certificate
	// files hold by the time it starts (they are read once, by the node;
	// a new certificate takes effect when the node restarts). The spec
	// therefore goes to the sampler through a pipe alone (startProc),
	// and is never logged or written to a file.
	Identity mesh.IdentityPEM `json:"identity"`
	Node     string           `json:"node"`
	Cluster  string           `json:"cluster"`
	Checksum string           `json:"checksum"`
	Part     int              `json:"part"`
	Peers    map[int]SpecPeer `json:"peers"`
	Timeout  time.Duration    `json:"timeout_ns"`
	Retries  int              `json:"retries"` // as mesh.ClientConfig.Retries
	Bounds   []uint64         `json:"bounds"`  // partition.Book bounds
	// MaxMessage is as mesh.ClientConfig.MaxMessage, the node's (0: the
	// mesh's default): a request that would pass it is split.
	MaxMessage int `json:"max_message,omitempty"`
}

// SpecPeer is one peer in a SamplerMesh.
type SpecPeer struct {
	Name string `json:"name"`
	Addr string `json:"addr"`
}

// MaxSamplerSpec bounds an encoded SamplerSpec: a sampler reads no more.
const MaxSamplerSpec = control.MaxFrame

// Encode is the spec as the JSON the sampler reads.
func (s *SamplerSpec) Encode() ([]byte, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("node: encode sampler spec: %w", err)
	}
	return b, nil
}

// ReadSamplerSpec reads and checks a spec from r (a sampler's stdin).
func ReadSamplerSpec(r io.Reader) (*SamplerSpec, error) {
	body, err := io.ReadAll(io.LimitReader(r, MaxSamplerSpec+1))
	if err != nil {
		return nil, fmt.Errorf("node: read sampler spec: %w", err)
	}
	if len(body) > MaxSamplerSpec {
		return nil, fmt.Errorf("node: sampler spec larger than %d bytes: %w", MaxSamplerSpec, ErrConfig)
	}
	var s SamplerSpec
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("node: sampler spec: %v: %w", err, ErrConfig)
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

func (s *SamplerSpec) validate() error {
	var p problems
	if s.Part == "" {
		p.add("part", "missing")
	}
	if s.PartFD < 0 {
		p.add("part_fd", "%d is negative", s.PartFD)
	}
	if s.PartID.Size <= 0 {
		p.add("part_id", "missing: the identity of the node's partition file")
	}
	if s.Ring == "" {
		p.add("ring", "missing")
	}
	if s.Workers < 1 || s.Workers > control.MaxWorkers {
		p.add("workers", "%d is out of range 1..%d", s.Workers, control.MaxWorkers)
	}
	if s.Worker < 0 || s.Worker >= s.Workers {
		p.add("worker", "%d is out of range 0..%d", s.Worker, s.Workers-1)
	}
	if s.Options.Workers != s.Workers {
		p.add("options.workers", "%d, but workers is %d", s.Options.Workers, s.Workers)
	}
	if s.Options.Concurrency < 1 {
		p.add("options.concurrency", "%d is not positive", s.Options.Concurrency)
	}
	o := s.Options
	if o.Split == "" && o.SeedIDs == nil && o.SeedEdges == nil {
		o.SeedIDs = s.Seeds // the node sends seed_ids once, as the seeds
	}
	if err := o.Validate(); err != nil {
		p = append(p, err)
	}
	if m := s.Mesh; m != nil {
		if len(m.Bounds) < 3 || m.Part < 0 || m.Part >= len(m.Bounds)-1 {
			p.add("mesh.bounds", "%d bounds for part %d: want one more than the parts, at least 2 parts", len(m.Bounds), m.Part)
		}
		if m.Timeout <= 0 {
			p.add("mesh.timeout_ns", "%d is not positive", m.Timeout)
		}
	}
	if err := p.err(); err != nil {
		return fmt.Errorf("node: sampler spec: %w", err)
	}
	return nil
}
