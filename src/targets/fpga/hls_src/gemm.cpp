// 8x8x8 GEMM for Vitis HLS (target=vivado); same loop nest as src/datasets/hls/gemm.yaml.
// Loop labels L_i, L_j, L_k are where the directives TCL attaches unroll/pipeline.
#define N 8
void gemm(unsigned char A[N][N], unsigned char B[N][N], unsigned int C[N][N]) {
L_i:
  for (int i = 0; i < N; i++) {
  L_j:
    for (int j = 0; j < N; j++) {
      unsigned int acc = 0;
    L_k:
      for (int k = 0; k < N; k++) {
        unsigned int prod = A[i][k] * B[k][j];
        acc += prod;
      }
      C[i][j] = acc;
    }
  }
}
