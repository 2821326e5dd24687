"""The classes of a school's hosts in Redis (issue 84): MHA_CLASS_STORE=redis://host:port/db. Every app process of
every host reads the same class; a teacher's move is written and published in one step (a Lua script), and each
process hears it on one subscription (listen) and reruns its own followers: no process polls. The students checked in
are a sorted set per class that expires when nobody checks in; a class's row expires once it has ended (after
ENDED_KEPT_S) or sat idle (IDLE_LIMIT_S), and a start deletes what its clock says is finished, as SQLite's does.
Nothing of redis leaves this module: a failure is stored.unavailable(reason), and the next call connects again."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from mha_core.messages import N_, InputError
from mha_core.serving.classes.stored import (
    ENDED_KEPT_S,
    FAILED,
    FOLLOWING_S,
    IDLE_LIMIT_S,
    Limits,
    Row,
    unavailable,
)

PREFIX = "mha:classes:v1:"  # every key of this schema: another version's (or another program's) keys are left alone
LISTEN_S = 1.0  # how long the subscription waits for a message before it looks again (and pings, every HEALTH_S)
HEALTH_S = 5  # a subscription silent this long is pinged: a host gone without closing its connection is noticed
RECONNECT_S = 1.0  # after a lost subscription, how long before it tries again
UNREACHABLE = N_("its store cannot be reached")
STARTING = N_("its store is still starting")
FIELDS = ("step", "text", "language", "model", "moved", "ended", "secret", "visitor")
CREATE = """
local p, code, now = ARGV[1], ARGV[2], tonumber(ARGV[3])
local idle, kept, visitor = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[15]
local open, mine = 0, 0
for _, c in ipairs(redis.call('smembers', p .. 'codes')) do
  local f = redis.call('hmget', p .. 'class:' .. c, 'moved', 'ended', 'visitor')
  local moved, ended = tonumber(f[1]), tonumber(f[2])
  if moved == nil or moved < now - idle or (ended > 0 and ended < now - kept) then
    redis.call('del', p .. 'class:' .. c, p .. 'students:' .. c)
    redis.call('srem', p .. 'codes', c)
  elseif ended == 0 then
    open = open + 1
    if visitor ~= '' and f[3] == visitor then mine = mine + 1 end
  end
end
if open >= tonumber(ARGV[6]) then return 'full' end
if mine >= tonumber(ARGV[7]) then return 'visitor_full' end
local key = p .. 'class:' .. code
if redis.call('exists', key) == 1 then return 'taken' end
redis.call('hset', key, 'step', ARGV[9], 'text', ARGV[10], 'language', ARGV[11], 'model', ARGV[12],
           'moved', ARGV[13], 'ended', '0', 'secret', ARGV[14], 'visitor', visitor)
redis.call('expire', key, ARGV[8])
redis.call('sadd', p .. 'codes', code)
return 'started'
"""
UPDATE = """
local f = redis.call('hmget', KEYS[1], 'step', 'text', 'ended')
if f[1] ~= ARGV[1] or f[2] ~= ARGV[2] or f[3] ~= '0' then return 0 end
redis.call('hset', KEYS[1], 'step', ARGV[3], 'text', ARGV[4], 'moved', ARGV[5])
redis.call('expire', KEYS[1], ARGV[6])
redis.call('publish', ARGV[7], ARGV[8])
return 1
"""
END = """
if redis.call('exists', KEYS[1]) == 0 then return 0 end
redis.call('hset', KEYS[1], 'ended', ARGV[1])
redis.call('expire', KEYS[1], ARGV[2])
redis.call('publish', ARGV[3], ARGV[4])
return 1
"""


def reason(err: redis.RedisError) -> str:
    if isinstance(err, redis.BusyLoadingError):
        return STARTING
    if isinstance(err, redis.ConnectionError | redis.TimeoutError):
        return UNREACHABLE
    return FAILED


@contextlib.contextmanager
def said() -> Iterator[None]:
    """A failure of Redis as the one error a store raises."""
    try:
        yield
    except redis.RedisError as err:
        raise unavailable(reason(err)) from err


class RedisStore:
    """One client per process (a pool of connections, each command once more on a dropped connection: a restarted
    Redis is reached again at the next command), answering within busy_s or saying why not."""

    pushes_moves = True

    def __init__(self, location: str, busy_s: float) -> None:
        self.location = location
        options = {"socket_timeout": busy_s, "socket_connect_timeout": busy_s}
        self.client = redis.Redis.from_url(location, retry=Retry(NoBackoff(), 1), **options)
        self.listener = redis.Redis.from_url(location, retry=Retry(NoBackoff(), 0), health_check_interval=HEALTH_S,
                                             **options)  # a lost subscription is said, never silently resumed
        self.channel = f"{PREFIX}moves"
        self.create_script = self.client.register_script(CREATE)
        self.update_script = self.client.register_script(UPDATE)
        self.end_script = self.client.register_script(END)

    def key(self, code: str) -> str:
        return f"{PREFIX}class:{code}"

    def create(self, code: str, row: Row, now: float, limits: Limits) -> str:
        values = [PREFIX, code, repr(now), IDLE_LIMIT_S, ENDED_KEPT_S, limits.classes, limits.per_visitor,
                  IDLE_LIMIT_S + ENDED_KEPT_S, row.step, row.text, row.language, row.model, repr(row.moved),
                  row.secret, row.visitor]
        with said():
            return self.create_script(args=values).decode()

    def read(self, code: str) -> Row | None:
        with said():
            found = self.client.hmget(self.key(code), FIELDS)
        if found[0] is None:
            return None
        step, text, language, model, moved, ended, secret, visitor = (value.decode() for value in found)
        return Row(int(step), text, language, model, float(moved), float(ended), secret, visitor)

    def update(self, code: str, since: tuple[int, str], to: tuple[int, str], now: float) -> bool:
        with said():
            return bool(self.update_script(keys=[self.key(code)], args=[
                since[0], since[1], to[0], to[1], repr(now), IDLE_LIMIT_S + ENDED_KEPT_S, self.channel, code]))

    def end(self, code: str, now: float) -> None:
        with said():
            self.end_script(keys=[self.key(code)], args=[repr(now), ENDED_KEPT_S, self.channel, code])

    def seen(self, code: str, students: list[str], now: float) -> None:
        key = f"{PREFIX}students:{code}"
        with said():
            pipe = self.client.pipeline()
            pipe.zadd(key, dict.fromkeys(students, now))
            pipe.zremrangebyscore(key, "-inf", now - 2 * FOLLOWING_S)
            pipe.expire(key, int(2 * FOLLOWING_S))
            pipe.execute()

    def following(self, code: str, since: float) -> int:
        with said():
            return int(self.client.zcount(f"{PREFIX}students:{code}", f"({since!r}", "+inf"))

    def listen(self, heard: Callable[[str | None], None], lost: Callable[[InputError], None]) -> None:
        while True:
            try:
                with self.listener.pubsub(ignore_subscribe_messages=True) as subscription:
                    subscription.subscribe(self.channel)
                    heard(None)  # (re)subscribed: any class may have moved while nobody listened
                    while True:
                        message = subscription.get_message(timeout=LISTEN_S)
                        if message is not None and message["type"] == "message":
                            heard(message["data"].decode())
            except redis.RedisError as err:
                lost(unavailable(reason(err)))
                time.sleep(RECONNECT_S)
