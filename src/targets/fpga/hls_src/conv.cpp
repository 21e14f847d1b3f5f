// 3x3 convolution of an 8x8 image (valid, 6x6 output) for Vitis HLS (target=vivado);
// same loop nest as src/datasets/hls/conv.yaml.
void conv(unsigned char img[8][8], unsigned char w[3][3], unsigned int out[6][6]) {
L_oy:
  for (int oy = 0; oy < 6; oy++) {
  L_ox:
    for (int ox = 0; ox < 6; ox++) {
      unsigned int acc = 0;
    L_ky:
      for (int ky = 0; ky < 3; ky++) {
      L_kx:
        for (int kx = 0; kx < 3; kx++) {
          unsigned int prod = img[oy + ky][ox + kx] * w[ky][kx];
          acc += prod;
        }
      }
      out[oy][ox] = acc;
    }
  }
}
