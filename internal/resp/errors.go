package resp

// ProtocolError reports malformed input from the client. After one, the
// stream cannot be resynchronised: reply with "-ERR " + Error() and close
// the connection, as Redis does.
type ProtocolError struct {
	// Msg uses Redis's wording where Redis has one, such as
	// "invalid bulk length".
	Msg string
}

// Error returns "Protocol error: " followed by Msg.
func (e *ProtocolError) Error() string { return "Protocol error: " + e.Msg }

// Messages shared by several call sites.
const (
	msgTooBig          = "too big request"
	msgTooBigInline    = "too big inline request"
	msgMultibulkLength = "invalid multibulk length"
	msgBulkLength      = "invalid bulk length"
	msgBulkEnd         = "bulk string not followed by CRLF"
)

func protocolError(msg string) error { return &ProtocolError{Msg: msg} }
