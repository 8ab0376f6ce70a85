package resp_test

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/counterd/counterd/internal/resp"
)

// The server loop: answer every buffered command, write the replies in one
// go, then read more.
func ExampleReader() {
	conn := strings.NewReader("*2\r\n$4\r\nINCR\r\n$7\r\npost:42\r\nPING\r\nGET post:42\r\n*1\r\n$")
	rd := resp.NewReader(conn, 64<<10)
	var out []byte
	for {
		for {
			args, ok, err := rd.Next()
			if err != nil {
				out = resp.AppendError(out, "ERR "+err.Error())
				fmt.Printf("%q\n", out)
				return
			}
			if !ok {
				break
			}
			switch strings.ToUpper(string(args[0])) {
			case "PING":
				out = resp.AppendSimple(out, "PONG")
			case "INCR":
				out = resp.AppendInt(out, 1)
			default:
				out = resp.AppendBulkInt(out, 1)
			}
		}
		if len(out) > 0 {
			fmt.Printf("%q\n", out) // conn.Write(out)
			out = out[:0]
		}
		if err := rd.Fill(); err != nil {
			if errors.Is(err, io.EOF) {
				fmt.Println("closed with", rd.Buffered(), "bytes of an unfinished command")
			}
			return
		}
	}
	// Output:
	// ":1\r\n+PONG\r\n$1\r\n1\r\n"
	// closed with 5 bytes of an unfinished command
}
