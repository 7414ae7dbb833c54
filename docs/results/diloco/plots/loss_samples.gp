# Written by bagpipe report; edit and run `gnuplot loss_samples.gp` in this folder to redraw
# loss_samples.svg and loss_samples.png.
do for [format in "svg png"] {
if (format eq "svg") {
  set terminal svg size 960,560 dynamic noenhanced font 'Helvetica,13' \
    background '#ffffff'
} else {
  set terminal pngcairo size 960,560 noenhanced font 'Helvetica,11' \
    background '#ffffff'
}
set output 'loss_samples.'.format
reset
set grid lc rgb '#dddddd'
set border lc rgb '#444444'
set title 'validation loss against samples seen'
set xlabel 'samples'
set ylabel 'validation loss (nats/byte)'
set key top right opaque
set xlabel 'samples seen (sequences)'
plot \
  'run1_loss.dat' using 3:4 with linespoints lw 2 pt 7 ps 0.6 title 'run001: gpt allreduce, dp 2 x pp 1 x tp 1', \
  'run2_loss.dat' using 3:4 with linespoints lw 2 pt 7 ps 0.6 title 'run002: gpt diloco, dp 2 x pp 1 x tp 1', \
  'run3_loss.dat' using 3:4 with linespoints lw 2 pt 7 ps 0.6 title 'run003: gpt diloco, dp 2 x pp 1 x tp 1', \
  'run4_loss.dat' using 3:4 with linespoints lw 2 pt 7 ps 0.6 title 'run004: gpt diloco, dp 2 x pp 1 x tp 1', \
  'run5_loss.dat' using 3:4 with linespoints lw 2 pt 7 ps 0.6 title 'run005: gpt diloco, dp 2 x pp 1 x tp 1', \
  'run6_loss.dat' using 3:4 with linespoints lw 2 pt 7 ps 0.6 title 'run006: gpt streaming-diloco, dp 2 x pp 1 x tp 1', \
  'run7_loss.dat' using 3:4 with linespoints lw 2 pt 7 ps 0.6 title 'run007: gpt streaming-diloco, dp 2 x pp 1 x tp 1', \
  'run8_loss.dat' using 3:4 with linespoints lw 2 pt 7 ps 0.6 title 'run008: gpt diloco, dp 2 x pp 1 x tp 1', \
  'run9_loss.dat' using 3:4 with linespoints lw 2 pt 7 ps 0.6 title 'run009: gpt diloco, dp 2 x pp 1 x tp 1', \
  'run10_loss.dat' using 3:4 with linespoints lw 2 pt 7 ps 0.6 title 'run010: gpt diloco, dp 2 x pp 1 x tp 1', \
  'run11_loss.dat' using 3:4 with linespoints lw 2 pt 7 ps 0.6 title 'run011: gpt diloco, dp 2 x pp 1 x tp 1', \
  'run12_loss.dat' using 3:4 with linespoints lw 2 pt 7 ps 0.6 title 'run012: gpt diloco, dp 2 x pp 1 x tp 1', \
  'run13_loss.dat' using 3:4 with linespoints lw 2 pt 7 ps 0.6 title 'run013: gpt diloco, dp 2 x pp 1 x tp 1', \
  'run14_loss.dat' using 3:4 with linespoints lw 2 pt 7 ps 0.6 title 'run014: gpt streaming-diloco, dp 2 x pp 1 x tp 1'
unset multiplot
set output
}
