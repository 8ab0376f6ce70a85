package resp

import "fmt"

// ProtocolError reports malformed input from the client. After one, the
// stream cannot be resynchronised: reply with "-ERR " + Error() and close
// the connection, as Redis does.
type ProtocolError struct {
	// Msg uses Redis's wording where Redis has one, such as
	// "invalid bulk length".
	Msg string
	// Limit is the size in bytes a too big request passed; 0 for other
	// errors.
	Limit int
	// Inline says Limit is the inline line's (fixed, as Redis's), not the
	// command's.
	Inline bool
}

// Error returns "Protocol error: " followed by Msg, and the limit a too
// big request passed.
func (e *ProtocolError) Error() string {
	if e.Limit > 0 {
		return fmt.Sprintf("Protocol error: %s (limit %d bytes)", e.Msg, e.Limit)
	}
	return "Protocol error: " + e.Msg
}

// Messages shared by several call sites.
const (
	msgTooBig          = "too big request"
	msgTooBigInline    = "too big inline request"
	msgMultibulkLength = "invalid multibulk length"
	msgBulkLength      = "invalid bulk length"
	msgBulkEnd         = "bulk string not followed by CRLF"
	// Redis's words for a client that has not authenticated.
	msgUnauthMultibulk = "unauthenticated multibulk length"
	msgUnauthBulk      = "unauthenticated bulk length"
	msgUnauthTooBig    = "unauthenticated request too big"
)

func protocolError(msg string) error { return &ProtocolError{Msg: msg} }

// tooBig is the error for a command past the command limit.
func (r *Reader) tooBig() error {
	msg := msgTooBig
	if r.lim.Unauthenticated {
		msg = msgUnauthTooBig
	}
	return &ProtocolError{Msg: msg, Limit: r.lim.Command}
}

// tooBigInline is the error for an inline line past the inline limit.
func (r *Reader) tooBigInline() error {
	msg := msgTooBigInline
	if r.lim.Unauthenticated {
		msg = msgUnauthTooBig
	}
	return &ProtocolError{Msg: msg, Limit: r.lim.Inline, Inline: true}
}

// badLength is the error for a multibulk (bulk false) or bulk length
// header that is malformed or past its limit: Redis's "unauthenticated"
// wording when the header is well formed but past an unauthenticated
// client's limit.
func (r *Reader) badLength(bulk, wellFormed bool) error {
	switch {
	case bulk && wellFormed && r.lim.Unauthenticated:
		return protocolError(msgUnauthBulk)
	case bulk:
		return protocolError(msgBulkLength)
	case wellFormed && r.lim.Unauthenticated:
		return protocolError(msgUnauthMultibulk)
	}
	return protocolError(msgMultibulkLength)
}
