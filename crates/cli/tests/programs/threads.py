# CPython's threads: a bounded queue between producers and consumers, thread-local data,
# a timed condition wait and a thread pool (the GIL is a mutex and a condition variable
# with timed waits, taken and given back every few milliseconds).
import concurrent.futures as cf
import hashlib
import queue
import threading
import time

q = queue.Queue(maxsize=64)
local = threading.local()
totals = []
lock = threading.Lock()


def produce(n):
    for i in range(n):
        q.put(i)


def consume(n):
    local.me = threading.get_ident()
    s = 0
    for _ in range(n):
        s += q.get()
    assert local.me == threading.get_ident()
    with lock:
        totals.append(s)


N = 20000
ts = [threading.Thread(target=produce, args=(N,)) for _ in range(4)]
ts += [threading.Thread(target=consume, args=(N,)) for _ in range(4)]
for t in ts:
    t.start()
for t in ts:
    t.join()
assert sum(totals) == 4 * sum(range(N)), totals

cond = threading.Condition()
with cond:
    t0 = time.monotonic()
    cond.wait(0.05)
    waited = time.monotonic() - t0
assert 0.04 < waited < 5.0, waited

with cf.ThreadPoolExecutor(8) as pool:
    digests = list(pool.map(lambda b: hashlib.sha256(b).hexdigest(),
                            [bytes([i]) * 100000 for i in range(200)]))
assert len(set(digests)) == 200
print("ok")
