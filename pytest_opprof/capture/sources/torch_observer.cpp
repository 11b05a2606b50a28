// pytest-opprof's torch op observer: a RecordFunction callback that records
// what Kineto's CPU activity records for our summary (name, start/end, thread,
// input shapes, dtypes and devices, the concrete scalar inputs the FLOP formulas
// and the traffic rule need, memory instants) into per-thread C++ buffers, read in bulk after stop.
// With device timing on, an op with a CUDA tensor input also gets a CUDA event
// pair on its device's current stream (through c10's device guard, torch's own
// device-generic event API; the events are reused from session to session),
// resolved only at read time.
//
// Compiled against the installed torch by torch_observer.py
// (torch.utils.cpp_extension.load); the Python side turns the buffers into
// the same KinetoRead that the Kineto path builds, so everything downstream
// is shared.
//
// It mirrors Kineto's non-global CPU profiling exactly where that decides
// which events exist: a *thread-local* callback on every RecordScope (Kineto
// passes an empty scope set, which means all), and a ProfilerStateBase pushed
// as the thread's PROFILER_STATE debug info, so c10's allocators report
// memory to it and at::ThreadLocalState carries both to the threads torch
// hands work to (autograd, intra-op pools), as it carries Kineto's.  Being a
// ProfilerStateBase also makes torch see a profiler enabled, so a second
// torch profiler refuses to start, as it does beside Kineto.

#include <ATen/record_function.h>
#include <c10/core/ScalarType.h>
#include <c10/core/ScalarTypeToTypeMeta.h>
#include <c10/util/ThreadLocalDebugInfo.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <sys/syscall.h>
#include <time.h>
#include <torch/csrc/profiler/orchestration/observer.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace py = pybind11;
using torch::profiler::impl::ActiveProfilerType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;
using torch::profiler::impl::ProfilerStateBase;

namespace {

// Argument encoding, one int64 stream per thread (decoded in Python once per
// distinct signature): per input a tag, then its payload.
enum : int64_t {
    TAG_TENSOR = 1,         // dtype id, ndim, sizes...
    TAG_TENSOR_LIST = 2,    // (Kineto: shape [], dtype "TensorList")
    TAG_LIST_UNDEFINED = 3, // a tensor list holding an undefined tensor: dtype ""
    TAG_SCALAR = 4,         // kind (0 int, 1 bool, 2 other, 3 double bits), value
    TAG_SCALAR_LIST = 5,    // n, then n x (kind, value)
    TAG_OTHER = 6,          // undefined tensor or anything else: shape [], dtype ""
    TAG_TENSOR_ON = 7,      // a tensor off the host: as TAG_TENSOR, then device type, index
    TAG_DEVICE = 8,         // a Device argument: type, index (Kineto: shape [], dtype "")
};
constexpr size_t SCALAR_LIST_LIMIT = 30; // Kineto's SCALAR_LIST_LENGTH_LIMIT

struct Op {
    int64_t start_ns;
    int64_t end_ns;
    uint64_t args_begin; // into the thread's args stream
    uint64_t args_end;
    uint32_t name;
    uint32_t pair; // 1 + index into the thread's CUDA event pairs; 0: not timed
};

struct Pair {
    void *begin = nullptr; // CUDA events (c10's device guard owns the type)
    void *end = nullptr;   // null until the op exits on this thread
    c10::DeviceIndex device = -1;
};

struct Mem {
    int64_t time_ns;
    int64_t bytes;
    int64_t device; // HOST_MEMORY, or the device's type << 8 | its index
};

// A Mem's device where c10's CPU allocator reported it.
constexpr int64_t HOST_MEMORY = -1;

struct Open {
    const at::RecordFunction *fn;
    size_t index;
};

struct ThreadBuf {
    uint64_t tid = 0;
    uint64_t session = 0;
    std::vector<Op> ops;
    std::vector<int64_t> args;
    std::vector<Mem> mems;
    std::vector<Open> open;
    std::vector<Pair> pairs;
    std::vector<uint32_t> cuda_calls; // per name id: calls with a CUDA input this session
    // Events of past sessions, per device, recorded again instead of created:
    // creating and destroying a pair cost more than the op on launch-bound loops.
    std::vector<std::vector<void *>> spare_events;
};

struct Names {
    std::mutex mu;
    std::deque<std::string> strings; // stable storage for the views below
    std::unordered_map<std::string_view, uint32_t> ids;
    std::vector<bool> concrete; // per id: record scalar values (FLOP formulas)
    std::unordered_set<std::string> concrete_names;
};

struct Global {
    std::mutex mu;
    std::vector<std::unique_ptr<ThreadBuf>> threads; // never freed: tls pointers stay valid
    std::atomic<uint64_t> session{0};
    std::atomic<bool> active{false};
    bool record = true; // false: the callbacks return at once (the benchmark's floor)
    bool time_device = false; // CUDA event pairs around ops with a CUDA input
    uint32_t sample_rate = 1; // ... around every sample_rate-th such call of each name
    Names names;
    at::CallbackHandle handle = 0;
    size_t reserve_ops = 1 << 14;
};

Global &g()
{
    static Global *g_ = new Global(); // leaked: threads may outlive static destruction
    return *g_;
}

thread_local ThreadBuf *tls_buf = nullptr;

struct CachedName {
    uint32_t id; // with CONCRETE_BIT
    const char *text; // the interned copy
};
// Per-thread name cache keyed by the name's address: an operator's name is its
// schema's string, alive as long as the operator, but some FUNCTION-scope
// names (the autograd engine's "evaluate_function: ...") are temporaries whose
// address is reused, so a hit is confirmed by comparing the text.
thread_local std::unordered_map<const char *, CachedName> *tls_name_cache = nullptr;

inline int64_t now_ns()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

ThreadBuf *thread_buf()
{
    Global &G = g();
    uint64_t session = G.session.load(std::memory_order_acquire);
    ThreadBuf *b = tls_buf;
    if (b != nullptr && b->session == session)
        return b;
    if (b == nullptr) {
        auto owned = std::make_unique<ThreadBuf>();
        owned->tid = (uint64_t)syscall(SYS_gettid);
        b = owned.get();
        std::lock_guard<std::mutex> lock(G.mu);
        G.threads.push_back(std::move(owned));
        tls_buf = b;
    }
    // A thread first seen in this session: start() cleared every buffer.
    b->session = session;
    return b;
}

constexpr uint32_t CONCRETE_BIT = 1u << 31;

// The name's id, with CONCRETE_BIT set when its scalar inputs are recorded.
uint32_t intern_slow(const char *name)
{
    Names &N = g().names;
    std::lock_guard<std::mutex> lock(N.mu);
    std::string_view key(name);
    auto it = N.ids.find(key);
    uint32_t id;
    if (it != N.ids.end()) {
        id = it->second;
    } else {
        N.strings.emplace_back(name);
        id = (uint32_t)N.concrete.size();
        N.ids.emplace(std::string_view(N.strings.back()), id);
        N.concrete.push_back(N.concrete_names.count(N.strings.back()) > 0);
    }
    return N.concrete[id] ? (id | CONCRETE_BIT) : id;
}

uint32_t intern(const at::RecordFunction &fn)
{
    const char *name = fn.name();
    if (tls_name_cache == nullptr)
        tls_name_cache = new std::unordered_map<const char *, CachedName>();
    auto it = tls_name_cache->find(name);
    if (it != tls_name_cache->end() && std::strcmp(it->second.text, name) == 0)
        return it->second.id;
    uint32_t id = intern_slow(name);
    const char *text;
    {
        Names &N = g().names;
        std::lock_guard<std::mutex> lock(N.mu);
        text = N.strings[id & ~CONCRETE_BIT].c_str();
    }
    (*tls_name_cache)[name] = CachedName{id, text};
    return id;
}

inline void push_scalar(std::vector<int64_t> &a, const c10::IValue &v)
{
    if (v.isBool()) {
        a.push_back(1);
        a.push_back(v.toBool() ? 1 : 0);
    } else if (v.isInt()) {
        a.push_back(0);
        a.push_back(v.toInt());
    } else if (v.isDouble()) {
        double d = v.toDouble();
        int64_t bits;
        std::memcpy(&bits, &d, sizeof bits);
        a.push_back(3);
        a.push_back(bits);
    } else {
        a.push_back(2); // complex/symbolic: Kineto's reader keeps "Scalar"
        a.push_back(0);
    }
}

inline bool plain_tensor(const at::Tensor &t)
{
    return t.defined() && !t.is_nested() &&
           !t.unsafeGetTensorImpl()->has_symbolic_sizes_strides();
}

// Returns the device index of the first tensor input on a CUDA device, or -1
// (always -1 without find_device: a CPU session asks no tensor its device).
c10::DeviceIndex encode_inputs(std::vector<int64_t> &a, c10::ArrayRef<const c10::IValue> inputs,
                               bool concrete, bool find_device)
{
    c10::DeviceIndex cuda = -1;
    for (const c10::IValue &v : inputs) {
        if (v.isTensor()) {
            const at::Tensor &t = v.toTensor();
            if (!plain_tensor(t)) {
                a.push_back(TAG_OTHER);
                continue;
            }
            if (find_device && cuda < 0 && t.is_cuda())
                cuda = t.device().index();
            auto sizes = t.sizes();
            // The device only off the host: a host-only session's signatures stay as they were.
            bool host = t.is_cpu();
            a.push_back(host ? TAG_TENSOR : TAG_TENSOR_ON);
            a.push_back((int64_t)t.scalar_type());
            a.push_back((int64_t)sizes.size());
            a.insert(a.end(), sizes.begin(), sizes.end());
            if (!host) {
                a.push_back((int64_t)t.device().type());
                a.push_back((int64_t)t.device().index());
            }
        } else if (v.isDevice()) {
            c10::Device d = v.toDevice();
            a.push_back(TAG_DEVICE);
            a.push_back((int64_t)d.type());
            a.push_back((int64_t)d.index());
        } else if (v.isScalar()) {
            a.push_back(TAG_SCALAR);
            if (concrete) {
                push_scalar(a, v);
            } else {
                a.push_back(2);
                a.push_back(0);
            }
        } else if (v.isTensorList()) {
            bool undefined = false;
            for (const at::Tensor &t : v.toTensorList().vec())
                undefined |= !plain_tensor(t);
            a.push_back(undefined ? TAG_LIST_UNDEFINED : TAG_TENSOR_LIST);
        } else if (v.isList()) {
            auto list = v.toListRef();
            bool scalars = list.empty() || (list[0].isScalar() && list.size() <= SCALAR_LIST_LIMIT);
            if (!scalars) {
                a.push_back(TAG_OTHER);
                continue;
            }
            a.push_back(TAG_SCALAR_LIST);
            if (!concrete) {
                a.push_back(-1); // values not needed: one signature for all
                continue;
            }
            a.push_back((int64_t)list.size());
            for (const c10::IValue &e : list)
                push_scalar(a, e);
        } else {
            a.push_back(TAG_OTHER);
        }
    }
    return cuda;
}

const c10::impl::DeviceGuardImplInterface *cuda_guard()
{
    static const c10::impl::DeviceGuardImplInterface *impl =
        c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
    return impl;
}

// Records *event (a spare one of the device, else a new one with timing on) on
// the device's current stream.
void record_event(ThreadBuf &b, void **event, c10::DeviceIndex device)
{
    if (*event == nullptr && (size_t)device < b.spare_events.size() &&
        !b.spare_events[device].empty()) {
        *event = b.spare_events[device].back();
        b.spare_events[device].pop_back();
    }
    const auto *impl = cuda_guard();
    c10::Stream stream = impl->getStream(c10::Device(c10::DeviceType::CUDA, device));
    impl->record(event, stream, device, c10::EventFlag::BACKEND_DEFAULT);
}

// The thread's pairs' events become spares (start() of the next session), up
// to keep per device; a huge profile's others are destroyed, as its buffers are
// not kept either.
void keep_spare_events(ThreadBuf &b, size_t keep)
{
    for (const Pair &pair : b.pairs) {
        if ((size_t)pair.device >= b.spare_events.size())
            b.spare_events.resize((size_t)pair.device + 1);
        std::vector<void *> &spares = b.spare_events[pair.device];
        for (void *event : {pair.begin, pair.end}) {
            if (event == nullptr)
                continue;
            if (spares.size() < keep)
                spares.push_back(event);
            else
                cuda_guard()->destroyEvent(event, pair.device);
        }
    }
    b.pairs.clear();
}

// Whether this call of the name gets an event pair: calls 1, 1 + rate, ...
// of each name on each thread, as the core samples its ops.
inline bool sampled(ThreadBuf &b, uint32_t name, uint32_t rate)
{
    if (rate <= 1)
        return true;
    if (name >= b.cuda_calls.size())
        b.cuda_calls.resize(name + 1, 0);
    return b.cuda_calls[name]++ % rate == 0;
}

std::unique_ptr<at::ObserverContext> on_enter(const at::RecordFunction &fn)
{
    Global &G = g();
    if (!G.active.load(std::memory_order_relaxed) || !G.record)
        return nullptr;
    ThreadBuf *b = thread_buf();
    uint32_t name = intern(fn);
    bool concrete = (name & CONCRETE_BIT) != 0;
    Op op;
    op.name = name & ~CONCRETE_BIT;
    op.pair = 0;
    op.args_begin = b->args.size();
    c10::DeviceIndex device = encode_inputs(b->args, fn.inputs(), concrete, G.time_device);
    op.args_end = b->args.size();
    op.end_ns = INT64_MIN;
    if (device >= 0 && sampled(*b, op.name, G.sample_rate)) {
        // Before the CPU clock is read: recording an event is not the op's time.
        Pair pair;
        pair.device = device;
        record_event(*b, &pair.begin, device);
        b->pairs.push_back(pair);
        op.pair = (uint32_t)b->pairs.size();
    }
    b->open.push_back({&fn, b->ops.size()});
    op.start_ns = now_ns(); // last: the encoding is not the op's time
    b->ops.push_back(op);
    return nullptr;
}

void on_exit(const at::RecordFunction &fn, at::ObserverContext *)
{
    int64_t t = now_ns();
    Global &G = g();
    if (!G.active.load(std::memory_order_relaxed) || !G.record)
        return;
    ThreadBuf *b = tls_buf;
    if (b == nullptr || b->session != G.session.load(std::memory_order_relaxed))
        return;
    // Innermost first; an op that ends on another thread (async) is not found
    // here and keeps the end given at read time.
    for (size_t i = b->open.size(); i-- > 0;) {
        if (b->open[i].fn == &fn) {
            Op &op = b->ops[b->open[i].index];
            op.end_ns = t;
            b->open.erase(b->open.begin() + (ptrdiff_t)i);
            if (op.pair != 0) {
                Pair &pair = b->pairs[op.pair - 1];
                record_event(*b, &pair.end, pair.device);
            }
            return;
        }
    }
}

struct ObserverState : public ProfilerStateBase {
    explicit ObserverState(const ProfilerConfig &config) : ProfilerStateBase(config) {}

    // c10's allocators call this on the allocating thread: the CPU allocator and
    // the CUDA caching allocator alike, each block's device named, as Kineto has
    // them for profile_memory (its memory events' device_type and device_index).
    void reportMemoryUsage(void *, int64_t alloc_size, size_t, size_t, c10::Device device) override
    {
        Global &G = g();
        if (!G.active.load(std::memory_order_relaxed))
            return;
        ThreadBuf *b = thread_buf();
        // Host memory as torch.profiler counts it (CPU, MKLDNN, IDEEP); every other
        // device's is device memory.
        const bool host = device.is_cpu() || device.type() == c10::DeviceType::MKLDNN ||
                          device.type() == c10::DeviceType::IDEEP;
        int64_t where =
            host ? HOST_MEMORY : ((int64_t)device.type() << 8) | (uint8_t)device.index();
        b->mems.push_back({now_ns(), alloc_size, where});
    }

    ActiveProfilerType profilerType() override { return ActiveProfilerType::NONE; }
};

bool g_state_pushed = false;

// The ops whose scalar inputs are kept (the FLOP formulas' concrete arguments);
// set once, before any name is interned (the per-thread caches keep the flag).
void set_concrete_names(const std::vector<std::string> &names)
{
    Names &N = g().names;
    std::lock_guard<std::mutex> lock(N.mu);
    if (!N.strings.empty())
        throw std::runtime_error("set_concrete_names: names already interned");
    N.concrete_names = std::unordered_set<std::string>(names.begin(), names.end());
}

// Starts recording on the calling thread (and the threads torch hands its
// work to).  Raises when a torch profiler is already enabled on this thread.
// record=false registers everything but records nothing: what RecordFunction
// with inputs costs by itself (bench/bench_torch_source.py).  time_device:
// CUDA event pairs around every sample_rate-th call of each op name with a
// CUDA input (the caller knows CUDA is initialised; torch's CPU builds have no CUDA
// device guard to record with).
void start(bool record, bool time_device, uint32_t sample_rate)
{
    Global &G = g();
    if (G.handle != 0 || torch::profiler::impl::profilerEnabled())
        throw std::runtime_error("a torch profiler is already enabled on this thread");
    {
        std::lock_guard<std::mutex> lock(G.mu);
        for (auto &t : G.threads) {
            t->ops.clear();
            t->args.clear();
            t->mems.clear();
            t->open.clear();
            keep_spare_events(*t, 2 * G.reserve_ops);
            t->cuda_calls.clear();
            if (t->ops.capacity() > (G.reserve_ops << 6)) {
                // a huge profile's buffers are not kept for the whole session
                std::vector<Op>().swap(t->ops);
                std::vector<int64_t>().swap(t->args);
            }
            if (t->mems.capacity() > (G.reserve_ops << 6))
                std::vector<Mem>().swap(t->mems);
        }
    }
    G.session.fetch_add(1, std::memory_order_acq_rel);
    ThreadBuf *b = thread_buf();
    if (b->ops.capacity() < G.reserve_ops) {
        b->ops.reserve(G.reserve_ops);
        b->args.reserve(G.reserve_ops * 8);
        b->mems.reserve(G.reserve_ops);
    }
    ProfilerConfig config(ProfilerState::CPU, /*report_input_shapes=*/true,
                          /*profile_memory=*/true);
    auto state = std::make_shared<ObserverState>(config);
    ProfilerStateBase::push(std::move(state));
    g_state_pushed = true;
    G.record = record;
    G.time_device = time_device && c10::impl::hasDeviceGuardImpl(c10::DeviceType::CUDA);
    G.sample_rate = sample_rate;
    G.active.store(true, std::memory_order_release);
    G.handle = at::addThreadLocalCallback(
        at::RecordFunctionCallback(on_enter, on_exit).needsInputs(true));
}

// Stops recording; safe to call when not started (every exit path calls it).
void stop()
{
    Global &G = g();
    G.active.store(false, std::memory_order_release);
    if (G.handle != 0) {
        at::removeCallback(G.handle);
        G.handle = 0;
    }
    if (g_state_pushed) {
        g_state_pushed = false;
        ProfilerStateBase::pop(/*global=*/false);
    }
}

bool recording() { return g().handle != 0; }

// The elapsed device time of an op's event pair (waits for both events), or -1.
int64_t device_ns(const ThreadBuf &t, const Op &op)
{
    if (op.pair == 0)
        return -1;
    const Pair &pair = t.pairs[op.pair - 1];
    if (!pair.begin || !pair.end)
        return -1;
    try {
        const auto *impl = cuda_guard();
        impl->synchronizeEvent(pair.end); // the begin is before it on the same stream
        double ms = impl->elapsedTime(pair.begin, pair.end, pair.device);
        return (int64_t)(ms * 1e6 + 0.5);
    } catch (const std::exception &) {
        return -1; // a failed event (e.g. the context is gone): not measured
    }
}

// Everything recorded since start(), in bulk:
//   ops:  int64 rows (start_ns, end_ns, thread, name id, signature id, device ns)
//         (device ns: the elapsed time of the op's CUDA event pair, its
//         children's included; -1 where not timed)
//   mems: int64 rows (time_ns, thread, bytes, device: HOST_MEMORY or type << 8 | index)
//   sigs: the distinct argument encodings, concatenated; sig_offsets: n+1 bounds
//   names: every interned name (ids index it)
// Ops still open get end = start (Kineto's events of unfinished ops are not
// read either: profiles stop outside the test body).
py::tuple read_buffers()
{
    Global &G = g();
    std::vector<int64_t> ops;
    std::vector<int64_t> mems;
    std::vector<int64_t> sigs;
    std::vector<int64_t> sig_offsets{0};
    std::unordered_map<std::string_view, int64_t> sig_ids;
    std::vector<std::string> names;
    {
        std::lock_guard<std::mutex> lock(G.mu);
        size_t n_ops = 0, n_mem = 0;
        for (auto &t : G.threads) {
            if (t->session != G.session.load())
                continue;
            n_ops += t->ops.size();
            n_mem += t->mems.size();
        }
        ops.reserve(n_ops * 6);
        mems.reserve(n_mem * 4);
        for (auto &t : G.threads) {
            if (t->session != G.session.load())
                continue;
            const int64_t *args = t->args.data();
            for (const Op &op : t->ops) {
                std::string_view key(reinterpret_cast<const char *>(args + op.args_begin),
                                     (op.args_end - op.args_begin) * sizeof(int64_t));
                auto it = sig_ids.find(key);
                int64_t sig;
                if (it == sig_ids.end()) {
                    sig = (int64_t)sig_ids.size();
                    sig_ids.emplace(key, sig);
                    sigs.insert(sigs.end(), args + op.args_begin, args + op.args_end);
                    sig_offsets.push_back((int64_t)sigs.size());
                } else {
                    sig = it->second;
                }
                ops.push_back(op.start_ns);
                ops.push_back(op.end_ns == INT64_MIN ? op.start_ns : op.end_ns);
                ops.push_back((int64_t)t->tid);
                ops.push_back(op.name);
                ops.push_back(sig);
                ops.push_back(device_ns(*t, op));
            }
            for (const Mem &m : t->mems) {
                mems.push_back(m.time_ns);
                mems.push_back((int64_t)t->tid);
                mems.push_back(m.bytes);
                mems.push_back(m.device);
            }
        }
    }
    {
        Names &N = G.names;
        std::lock_guard<std::mutex> lock(N.mu);
        names.assign(N.strings.begin(), N.strings.end());
    }
    auto as_bytes = [](const std::vector<int64_t> &v) {
        return py::bytes(reinterpret_cast<const char *>(v.data()), v.size() * sizeof(int64_t));
    };
    return py::make_tuple(as_bytes(ops), as_bytes(mems), as_bytes(sigs), as_bytes(sig_offsets),
                          names);
}

// Kineto's dtype text of each scalar type (TypeMeta names: "float", "long int").
std::vector<std::string> dtype_names()
{
    std::vector<std::string> out;
    for (int i = 0; i < (int)c10::ScalarType::NumOptions; i++) {
        auto st = (c10::ScalarType)i;
        try {
            out.emplace_back(std::string(c10::scalarTypeToTypeMeta(st).name()));
        } catch (const std::exception &) {
            out.emplace_back("");
        }
    }
    return out;
}

// c10's name of each device type, by number ("cpu", "cuda", "meta"; "" where none).
std::vector<std::string> device_type_names()
{
    std::vector<std::string> out;
    for (int i = 0; i < (int)c10::DeviceType::COMPILE_TIME_MAX_DEVICE_TYPES; i++) {
        try {
            out.emplace_back(c10::DeviceTypeName((c10::DeviceType)i, /*lower_case=*/true));
        } catch (const std::exception &) {
            out.emplace_back("");
        }
    }
    return out;
}

} // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)
{
    m.def("start", &start, py::arg("record") = true, py::arg("time_device") = false,
          py::arg("sample_rate") = 1);
    m.def("stop", &stop);
    m.def("recording", &recording);
    m.def("read", &read_buffers);
    m.def("dtype_names", &dtype_names);
    m.def("device_type_names", &device_type_names);
    m.def("set_concrete_names", &set_concrete_names);
    m.def("now_ns", &now_ns);
}
