package node

// Fetching one file from a peer: resumed from what a cut-off fetch left,
// locked against other fetches of it, checked as it lands, and its
// progress.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"graphnode/mesh"
	"graphnode/partition"
)

// fetchBeforeLock, when set (tests), runs as a fetch of final has found
// it absent and is about to lock its .fetch.
var fetchBeforeLock func(final string)

// file makes the file of e present: kept when it is there with its
// size, else fetched into <name>.fetch (going on from an earlier fetch's
// bytes) and renamed once its size and CRC-32C are e's. A download with
// another CRC-32C is dropped and fetched again from offset 0 without the
// peers that gave its bytes, until none is left.
func (f *fetcher) file(ctx context.Context, cli *mesh.Client, e partition.FileEntry) (FetchedFile, error) {
	final := filepath.Join(f.dir, filepath.FromSlash(e.Path))
	out := FetchedFile{Path: e.Path, Size: e.Size}
	if st, err := os.Stat(final); err == nil {
		if st.Size() != e.Size {
			return out, fmt.Errorf("node: fetch %s: %s is there with %d bytes, %s records %d: remove it to fetch it again: %w",
				e.Path, final, st.Size(), partition.ManifestFile, e.Size, ErrFetch)
		}
		return out, nil
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return out, fmt.Errorf("node: fetch %s: %w", e.Path, err)
	}
	if fetchBeforeLock != nil {
		fetchBeforeLock(final)
	}
	w, err := openPartial(final+fetchSuffix, e.Size)
	if err != nil {
		return out, fmt.Errorf("node: fetch %s: %w", e.Path, err)
	}
	defer w.close()
	// Another fetch into the directory may have put the file in place
	// between the look above and the lock: its .fetch, renamed, left the
	// lock free, and this one downloaded the whole file again and renamed
	// it over the other's.
	if st, err := os.Stat(final); err == nil && st.Size() == e.Size {
		os.Remove(final + fetchSuffix) // what this fetch just made
		return out, nil
	}
	out.Resumed = w.have
	if w.have > 0 {
		f.log.Info("fetch: going on from an earlier fetch", "file", e.Path, "have", w.have, "size", e.Size)
	}
	if err := checkSpace(filepath.Dir(final), e.Size-w.have); err != nil {
		return out, fmt.Errorf("node: fetch %s: %w: %w", e.Path, err, ErrFetch)
	}
	start, lastLine := time.Now(), time.Time{}
	var moved int64           // bytes transferred by this fetch, dropped ones too: its rate
	var src []int             // the parts of the peers that gave this download's bytes
	corrupt := map[int]bool{} // peers left out: their bytes were in a download with a wrong CRC-32C
	var bad []error           // what each dropped download was
	for {
		err = f.ask(ctx, e.Path, corrupt, func(part int) error {
			name := f.peers[part].Name
			var resp mesh.FileResponse
			for w.have < e.Size {
				req := mesh.FileRequest{Path: e.Path, Offset: uint64(w.have), Length: uint32(f.opts.chunk)}
				if err := cli.ReadFile(ctx, part, &req, &resp); err != nil {
					return err
				}
				if resp.Size != uint64(e.Size) {
					return fmt.Errorf("node: node %s holds %s with %d bytes, %s records %d: %w", name, e.Path, resp.Size, partition.ManifestFile, e.Size, ErrFetch)
				}
				before := w.have
				err := w.write(resp.Data)
				moved += w.have - before
				f.idleSince = time.Now()
				if err != nil {
					return localError{fmt.Errorf("node: fetch %s: %w (%d of %d bytes are in %s; fetch again to go on from them)", e.Path, err, w.have, e.Size, w.f.Name())}
				}
				if !slices.Contains(src, part) {
					src = append(src, part)
					out.From = append(out.From, name)
				}
				if f.opts.Progress != nil && time.Since(lastLine) >= time.Second {
					lastLine = time.Now()
					f.opts.Progress(progressLine(e.Path, name, w.have, e.Size, moved, time.Since(start)))
				}
			}
			return nil
		})
		if err != nil {
			// The bytes of this try stay for the next Fetch to go on from.
			if len(bad) > 0 && errors.Is(err, ErrFetch) {
				err = errors.Join(append([]error{err}, bad...)...)
			}
			return out, err
		}
		got := fmt.Sprintf("%08x", w.crc)
		if got == strings.ToLower(e.CRC32C) {
			break
		}
		// A download is blamed on its peers only when they gave every byte
		// of it: bytes an earlier Fetch left may be the wrong ones, so such
		// a download is fetched again once from offset 0, from any peer.
		from := out.From
		if out.Resumed > 0 {
			from = append(slices.Clip(from), "an earlier fetch")
		}
		bad = append(bad, fmt.Errorf("node: fetch %s: the bytes from %s have CRC-32C %s, %s records %s",
			e.Path, strings.Join(from, " and "), got, partition.ManifestFile, e.CRC32C))
		switch {
		case out.Resumed > 0:
			f.log.Warn("fetch: the download, which went on from an earlier fetch's bytes, has a wrong CRC-32C; fetching it again from its start",
				"file", e.Path, "peer", strings.Join(out.From, ","), "resumed_from", out.Resumed, "crc32c", got, "want", e.CRC32C)
		case len(src) == 0: // no bytes at all: graph.toml's CRC-32C is not its size's
			w.remove()
			return out, fmt.Errorf("node: fetch %s: %d bytes have CRC-32C %s, %s records %s: %w", e.Path, e.Size, got, partition.ManifestFile, e.CRC32C, ErrFetch)
		default:
			for _, part := range src {
				corrupt[part] = true
			}
			f.log.Warn("fetch: peer served a corrupt copy; leaving it out",
				"file", e.Path, "peer", strings.Join(out.From, ","), "crc32c", got, "want", e.CRC32C)
		}
		if err := w.reset(); err != nil {
			w.remove()
			return out, fmt.Errorf("node: fetch %s: %w", e.Path, err)
		}
		out.Resumed, out.From, src = 0, nil, nil
		if len(corrupt) == len(f.order) {
			w.remove()
			var names []string
			for _, part := range f.order {
				if corrupt[part] {
					names = append(names, f.peers[part].Name)
				}
			}
			head := fmt.Errorf("node: fetch %s: no peer is left: the copies of %s do not have the CRC-32C %s that %s records; the download is removed: %w",
				e.Path, strings.Join(names, ", "), e.CRC32C, partition.ManifestFile, ErrFetch)
			return out, errors.Join(append([]error{head}, bad...)...)
		}
	}
	out.Fetched, out.Elapsed = w.have-out.Resumed, time.Since(start)
	if err := w.commit(final); err != nil {
		return out, fmt.Errorf("node: fetch %s: %w", e.Path, err)
	}
	f.log.Info("fetched", "file", e.Path, "bytes", out.Fetched, "resumed_from", out.Resumed, "from", strings.Join(out.From, ","),
		"seconds", out.Elapsed.Seconds(), "MB_per_s", float64(out.Fetched)/1e6/max(out.Elapsed.Seconds(), 1e-9))
	return out, nil
}

// progressLine describes a transfer in progress.
func progressLine(path, from string, have, size, now int64, took time.Duration) string {
	return fmt.Sprintf("fetching %s from %s: %s of %s (%.0f%%), %.0f MB/s", path, from,
		humanBytes(have), humanBytes(size), 100*float64(have)/float64(max(size, 1)), float64(now)/1e6/max(took.Seconds(), 1e-9))
}

// humanBytes is n in B, kB, MB, GB or TB (powers of 1000).
func humanBytes(n int64) string {
	v, unit := float64(n), "B"
	for _, u := range []string{"kB", "MB", "GB", "TB"} {
		if v < 1000 {
			break
		}
		v, unit = v/1000, u
	}
	if unit == "B" {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.1f %s", v, unit)
}
