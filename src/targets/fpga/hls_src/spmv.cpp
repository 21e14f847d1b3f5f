// SpMV of a block-tridiagonal matrix in DIA format for Vitis HLS (target=vivado); same loop nest as
// src/datasets/hls/spmv.yaml: 4 blocks x 8 rows, 3 diagonals, x zero-padded by one word per block end.
// Loop labels L_r, L_c, L_k are where the directives TCL attaches unroll/pipeline.
void spmv(unsigned char val[4][8][3], unsigned char x[4][10], unsigned int y[4][8]) {
L_r:
  for (int r = 0; r < 4; r++) {
  L_c:
    for (int c = 0; c < 8; c++) {
      unsigned int acc = 0;
    L_k:
      for (int k = 0; k < 3; k++) {
        unsigned int prod = val[r][c][k] * x[r][c + k];
        acc += prod;
      }
      y[r][c] = acc;
    }
  }
}
