// activation_kernels.h — GPU kernels of the element-wise activations sigmoid,
// tanh, leaky_relu and prelu, as plain host functions on device pointers (no
// CUDA type appears here; activation_kernels.cu launches them on the default
// stream and checks the launch). The math is layers/cpu/activation_ops.h's,
// element for element, through the device forms in activation.cuh; the
// layouts are the same (prelu: NCHW, n samples × c channels × a plane of
// H·W elements, one slope per channel).
//
// Agreement with the CPU ops (T = float), as the tests assert:
//   bit for bit  leaky_relu and prelu forward and dx; sigmoid's and tanh's
//                backward (given the same y): the same IEEE float operations
//                in the same order, none a multiply-add that a compiler could
//                contract into an FMA. prelu's da: see below.
//   within ulps  sigmoid forward (CUDA expf, max 2 ulp, vs glibc expf; the
//                rest is the same operations) and tanh forward (CUDA tanhf vs
//                glibc tanhf, each within 2 ulp of tanh): a few ulp apart.
// prelu's slope gradient da (c floats, ACCUMULATED: da += Σ) is deterministic
// without atomics: each (sample, channel) plane is summed in double into its
// own slot of a workspace — serially by one thread when the plane is small
// (the CPU's order, so the same bits), by one block in a fixed tree when it
// is large — and one thread per channel then adds its slots in sample order
// and adds the float-rounded total to da. The CPU sums every plane serially,
// so for large planes the double sums may differ in their last bits and da,
// rounded to float, by at most an ulp (almost always not at all).
//
// dx is OVERWRITTEN; a null dx skips it. Every function returns at once for
// n = 0 (and prelu for a zero-sized plane).
#pragma once

#include <cstddef>
#include <cstdint>

namespace hpmc::gpu {

// The element-wise activations hpmc has, for activation.cuh's device forms
// (the conv epilogue picks one). kLeakyRelu and kPrelu take a slope.
enum class Act { kRelu, kLeakyRelu, kPrelu, kSigmoid, kTanh };

void sigmoid_forward(const float* x, float* y, size_t n);
void sigmoid_backward(const float* y, const float* dy, float* dx, size_t n);
void tanh_forward(const float* x, float* y, size_t n);
void tanh_backward(const float* y, const float* dy, float* dx, size_t n);
void leaky_relu_forward(const float* x, float* y, size_t n, float slope);
void leaky_relu_backward(const float* x, const float* dy, float* dx, size_t n, float slope);

// x, y: n × c × plane floats; slope: c floats on the device.
void prelu_forward(const float* x, const float* slope, float* y, int n, int c, size_t plane);
// The bytes of device workspace prelu_backward needs: n · c doubles.
size_t prelu_backward_workspace_bytes(int n, int c);
// dx (if non-null) = x > 0 ? dy : a·dy; dslope[ch] += Σ (x > 0 ? 0 : x·dy).
// workspace: prelu_backward_workspace_bytes(n, c) bytes of device memory
// (8-byte aligned), not read before it is written.
void prelu_backward(const float* x, const float* slope, const float* dy, float* dx,
                    float* dslope, int n, int c, size_t plane, void* workspace);

}  // namespace hpmc::gpu
