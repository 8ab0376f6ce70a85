package server

import (
	"context"

	"github.com/counterd/counterd/internal/resp"
)

// COMMAND and its subcommands, all generated from the command table.

// command answers COMMAND: every command's description.
func (c *session) command(context.Context, [][]byte) error {
	c.out = appendCommandInfos(c.out, c.conn.resp3, c.s.cmds.all)
	return nil
}

func (c *session) commandCount(context.Context, [][]byte) error {
	c.out = resp.AppendInt(c.out, int64(len(c.s.cmds.all)))
	return nil
}

func (c *session) commandList(_ context.Context, args [][]byte) error {
	if len(args) > 2 {
		c.fail("ERR syntax error (counterd's COMMAND LIST takes no filter)")
		return nil
	}
	c.out = resp.AppendArrayHeader(c.out, len(c.s.cmds.all))
	for _, s := range c.s.cmds.all {
		c.out = resp.AppendBulkString(c.out, s.name)
	}
	return nil
}

// commandInfo answers COMMAND INFO [name ...]: a null for an unknown name.
func (c *session) commandInfo(_ context.Context, args [][]byte) error {
	r3 := c.conn.resp3
	if len(args) == 2 {
		c.out = appendCommandInfos(c.out, r3, c.s.cmds.all)
		return nil
	}
	c.out = resp.AppendArrayHeader(c.out, len(args)-2)
	for _, name := range args[2:] {
		if s := c.s.cmds.lookupFull(name); s != nil {
			c.out = appendCommandInfo(c.out, r3, s)
		} else {
			c.out = appendNull(c.out, r3)
		}
	}
	return nil
}

// commandDocs answers COMMAND DOCS [name ...].
func (c *session) commandDocs(_ context.Context, args [][]byte) error {
	specs := c.s.cmds.all
	if len(args) > 2 {
		specs = nil
		for _, name := range args[2:] {
			if s := c.s.cmds.lookupFull(name); s != nil { // unknown names are left out, as Redis does
				specs = append(specs, s)
			}
		}
	}
	c.out = appendDocs(c.out, c.conn.resp3, specs)
	return nil
}

func appendCommandInfos(dst []byte, r3 bool, specs []*cmdSpec) []byte {
	dst = resp.AppendArrayHeader(dst, len(specs))
	for _, s := range specs {
		dst = appendCommandInfo(dst, r3, s)
	}
	return dst
}

// appendCommandInfo appends Redis 7's ten-element description of a
// command: name, arity, flags, first key, last key, step, ACL categories,
// tips, key specifications, subcommands.
func appendCommandInfo(dst []byte, r3 bool, s *cmdSpec) []byte {
	dst = resp.AppendArrayHeader(dst, 10)
	dst = resp.AppendBulkString(dst, s.name)
	dst = resp.AppendInt(dst, int64(s.arity))
	dst = appendSimples(dst, r3, s.flags)
	dst = resp.AppendInt(dst, int64(s.firstKey))
	dst = resp.AppendInt(dst, int64(s.lastKey))
	dst = resp.AppendInt(dst, int64(s.step))
	dst = appendSimples(dst, r3, s.acl)
	dst = appendSimples(dst, r3, s.tips)
	dst = appendKeySpecs(dst, r3, s)
	return appendCommandInfos(dst, r3, s.subs)
}

// appendKeySpecs describes where a command's keys are: from argument
// firstKey to the last key (relative: 0 is one key, -1 the last argument).
func appendKeySpecs(dst []byte, r3 bool, s *cmdSpec) []byte {
	if s.firstKey == 0 {
		return resp.AppendArrayHeader(dst, 0)
	}
	last := int64(0)
	if s.lastKey < 0 {
		last = -1
	}
	dst = resp.AppendArrayHeader(dst, 1)
	dst = appendMapHeader(dst, r3, 3)
	dst = resp.AppendBulkString(dst, "flags")
	dst = appendSimples(dst, r3, s.keyFlags)
	dst = resp.AppendBulkString(dst, "begin_search")
	dst = appendMapHeader(dst, r3, 2)
	dst = resp.AppendBulkString(dst, "type")
	dst = resp.AppendBulkString(dst, "index")
	dst = resp.AppendBulkString(dst, "spec")
	dst = appendMapHeader(dst, r3, 1)
	dst = resp.AppendBulkString(dst, "index")
	dst = resp.AppendInt(dst, int64(s.firstKey))
	dst = resp.AppendBulkString(dst, "find_keys")
	dst = appendMapHeader(dst, r3, 2)
	dst = resp.AppendBulkString(dst, "type")
	dst = resp.AppendBulkString(dst, "range")
	dst = resp.AppendBulkString(dst, "spec")
	dst = appendMapHeader(dst, r3, 3)
	dst = resp.AppendBulkString(dst, "lastkey")
	dst = resp.AppendInt(dst, last)
	dst = resp.AppendBulkString(dst, "keystep")
	dst = resp.AppendInt(dst, int64(s.step))
	dst = resp.AppendBulkString(dst, "limit")
	return resp.AppendInt(dst, 0)
}

// appendDocs appends COMMAND DOCS: a map from each name to its summary,
// since, group, complexity and, for a container, its subcommands' docs.
func appendDocs(dst []byte, r3 bool, specs []*cmdSpec) []byte {
	dst = appendMapHeader(dst, r3, len(specs))
	for _, s := range specs {
		dst = resp.AppendBulkString(dst, s.name)
		n := 4
		if len(s.subs) > 0 {
			n++
		}
		dst = appendMapHeader(dst, r3, n)
		for _, kv := range [][2]string{{"summary", s.summary}, {"since", s.since}, {"group", s.group}, {"complexity", s.complexity}} {
			dst = resp.AppendBulkString(dst, kv[0])
			dst = resp.AppendBulkString(dst, kv[1])
		}
		if len(s.subs) > 0 {
			dst = resp.AppendBulkString(dst, "subcommands")
			dst = appendDocs(dst, r3, s.subs)
		}
	}
	return dst
}
