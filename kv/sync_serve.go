package kv

import "context"

// HandleSync is Handle with the sessions of synchronous steps: a
// PushSyncRequest goes to Store.PushSyncSession and a LeaveRequest that
// names its table to Store.LeaveTableSession, with the session they
// carry (0 when they carry none: PushSync and LeaveTable); every other
// request to Handle. A node serves its peers' kv messages with it, so
// that a trainer's session reaches the shards of other nodes.
func (h *Handler) HandleSync(ctx context.Context, req, dst []byte) []byte {
	kind, err := PeekKind(req)
	if err != nil || kind != KindPushSyncRequest && kind != KindLeaveRequest {
		return h.Handle(ctx, req, dst)
	}
	out, err := h.handleSync(ctx, kind, req, dst)
	if err != nil {
		return AppendErrorMsg(dst, &ErrorMsg{Code: codeOf(err), Text: err.Error()})
	}
	return out
}

// handleSync serves a PushSyncRequest or a LeaveRequest (kind).
func (h *Handler) handleSync(ctx context.Context, kind Kind, req, dst []byte) ([]byte, error) {
	s := h.store
	if kind == KindLeaveRequest {
		var m LeaveRequest
		if err := DecodeLeaveRequest(req, &m); err != nil {
			return dst, err
		}
		if m.Table == "" {
			s.Leave(int(m.Trainer))
		} else {
			s.LeaveTableSession(m.Table, int(m.Trainer), m.Session)
		}
		return AppendAck(dst, &Ack{}), nil
	}
	sc := h.pool.Get().(*serveScratch)
	defer h.pool.Put(sc)
	m := &sc.sync
	if err := DecodePushSyncRequest(req, m); err != nil {
		return dst, err
	}
	t, err := s.table(m.Table)
	if err != nil {
		return dst, err
	}
	if err := s.PushSyncSession(ctx, m.Table, m.Step, int(m.Trainer), int(m.World), m.Session, m.Grads); err != nil {
		return dst, err
	}
	return AppendAck(dst, &Ack{Version: t.version.Load()}), nil
}
