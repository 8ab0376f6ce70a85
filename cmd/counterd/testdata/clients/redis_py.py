"""The client scenario of cmd/counterd/clients_test.go for redis-py (Debian's
python3-redis), with its default options (only the socket path set).

Usage: python3 redis_py.py SOCKET PREFIX

Prints one JSON report on stdout, as scenario.js does:
  {"client", "version", "steps": [{"name", "error"}], "sent": {key: delta}}
"sent" counts every increment handed to the library, acknowledged or not.
"""
import json
import signal
import sys

import redis

STEP_TIMEOUT_S = 20
BIG_TIMEOUT_S = 90
BIG_COMMANDS = 100000
BIG_KEYS = 4


class StepTimeout(Exception):
    pass


def on_alarm(signum, frame):
    raise StepTimeout("no answer within the step's time limit")


def expect(what, got, want):
    if got != want:
        raise AssertionError(f"{what}: got {got!r}; want {want!r}")


def expect_incrs(what, replies, cmds):
    if not isinstance(replies, list) or len(replies) != len(cmds):
        raise AssertionError(f"{what}: got {str(replies)[:200]}; want {len(cmds)} replies")
    for i, (reply, (key, by)) in enumerate(zip(replies, cmds)):
        if reply != by:
            name = "INCR" if by == 1 else "INCRBY"
            raise AssertionError(f"{what}: reply {i} to {name} {key}: got {reply!r}; want {by}")


def queue(pipe, cmds):
    for key, by in cmds:
        if by == 1:
            pipe.incr(key)
        else:
            pipe.incrby(key, by)
    return pipe


def main():
    socket, prefix = sys.argv[1], sys.argv[2]
    report = {"client": "redis-py", "version": redis.__version__, "steps": [], "sent": {}}
    sent = report["sent"]
    signal.signal(signal.SIGALRM, on_alarm)

    def send(cmds):
        for key, by in cmds:
            sent[key] = sent.get(key, 0) + by

    def step(name, fn, limit=STEP_TIMEOUT_S):
        error = ""
        signal.alarm(limit)
        try:
            fn()
        except Exception as e:  # every failure is the step's result
            error = f"{type(e).__name__}: {e}"
        finally:
            signal.alarm(0)
        report["steps"].append({"name": name, "error": error})

    r = redis.Redis(unix_socket_path=socket)
    k = lambda s: f"{prefix}:{s}"

    def connect():
        expect("PING", r.ping(), True)

    def incr():
        for _ in range(3):
            send([(k("incr"), 1)])
            expect("INCR", r.incr(k("incr")), 1)

    def incrby():
        send([(k("incrby"), 5)])
        expect("INCRBY 5", r.incrby(k("incrby"), 5), 5)
        send([(k("incrby"), -2)])
        expect("INCRBY -2", r.incrby(k("incrby"), -2), -2)

    def get():
        expect("GET", r.get(k("incr")), b"3")

    def mget():
        expect("MGET", r.mget([k("incr"), k("incrby"), k("never")]), [b"3", b"3", b"0"])

    def pipeline():
        cmds = [c for _ in range(10) for c in ((k("pipeline:a"), 1), (k("pipeline:b"), 2))]
        send(cmds)
        expect_incrs("pipeline", queue(r.pipeline(transaction=False), cmds).execute(), cmds)

    def transaction():
        cmds = [(k("transaction"), 1), (k("transaction"), 4)]
        send(cmds)
        # pipeline() is a MULTI/EXEC transaction by default.
        expect_incrs("MULTI/EXEC", queue(r.pipeline(), cmds).execute(), cmds)

    def pipeline100k():
        cmds = [(k(f"pipeline100k:{i % BIG_KEYS}"), 1) for i in range(BIG_COMMANDS)]
        send(cmds)
        expect_incrs("pipeline of 100000", queue(r.pipeline(transaction=False), cmds).execute(), cmds)

    def flush():
        # FLUSH answers "flush not confirmed" when PostgreSQL has not
        # committed within COUNTERD_FLUSH_TIMEOUT (a loaded machine), and
        # keeps the increments: ask again, as a client should, within the
        # step's time.
        while True:
            try:
                expect("FLUSH", r.execute_command("FLUSH"), b"OK")
                return
            except redis.ResponseError as e:
                if "flush not confirmed" not in str(e):
                    raise

    step("connect", connect)
    step("incr", incr)
    step("incrby", incrby)
    step("get", get)
    step("mget", mget)
    step("pipeline", pipeline)
    step("transaction", transaction)
    step("pipeline100k", pipeline100k, BIG_TIMEOUT_S)
    def client_info():
        # redis-py 4 parses CLIENT INFO's buffer and memory fields as
        # integers and failed (KeyError 'argv-mem') before counterd sent
        # every field of Redis's line.
        info = r.client_info()
        expect("CLIENT INFO id", isinstance(info["id"], int) and info["id"] > 0, True)
        expect("CLIENT INFO argv-mem", info["argv-mem"], 0)

    step("flush", flush, BIG_TIMEOUT_S)
    step("client_info", client_info)
    try:
        r.close()
    except Exception:
        pass  # the report is what matters
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
