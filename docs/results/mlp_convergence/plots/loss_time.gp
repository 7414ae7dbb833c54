# Written by bagpipe report; edit and run `gnuplot loss_time.gp` in this folder to redraw
# loss_time.svg and loss_time.png.
do for [format in "svg png"] {
if (format eq "svg") {
  set terminal svg size 960,560 dynamic noenhanced font 'Helvetica,13' \
    background '#ffffff'
} else {
  set terminal pngcairo size 960,560 noenhanced font 'Helvetica,11' \
    background '#ffffff'
}
set output 'loss_time.'.format
reset
set grid lc rgb '#dddddd'
set border lc rgb '#444444'
set title 'validation loss against training time'
set xlabel 'training time (s, sum of step times)'
set ylabel 'validation loss (nats/image)'
set key top right opaque
plot \
  'run1_loss.dat' using 2:4 with linespoints lw 2 pt 7 ps 0.6 title 'dp.allreduce: mlp allreduce, dp 2 x pp 1 x tp 1', \
  'run2_loss.dat' using 2:4 with linespoints lw 2 pt 7 ps 0.6 title 'dp.async: mlp async, dp 2 x pp 1 x tp 1', \
  'run3_loss.dat' using 2:4 with linespoints lw 2 pt 7 ps 0.6 title 'dp.bytegrad: mlp bytegrad, dp 2 x pp 1 x tp 1', \
  'run4_loss.dat' using 2:4 with linespoints lw 2 pt 7 ps 0.6 title 'dp.decentralized: mlp decentralized, dp 2 x pp 1 x tp 1', \
  'run5_loss.dat' using 2:4 with linespoints lw 2 pt 7 ps 0.6 title 'dp.easgd: mlp easgd, dp 2 x pp 1 x tp 1', \
  'run6_loss.dat' using 2:4 with linespoints lw 2 pt 7 ps 0.6 title 'dp.lp-decentralized: mlp lp-decentralized, dp 2 x pp 1 x tp 1', \
  'run7_loss.dat' using 2:4 with linespoints lw 2 pt 7 ps 0.6 title 'dp.powersgd: mlp powersgd, dp 2 x pp 1 x tp 1', \
  'run8_loss.dat' using 2:4 with linespoints lw 2 pt 7 ps 0.6 title 'occ.CB: mlp allreduce, dp 2 x pp 2 x tp 1, 1f1b M=2', \
  'run9_loss.dat' using 2:4 with linespoints lw 2 pt 7 ps 0.6 title 'occ.SC: mlp powersgd, dp 2 x pp 2 x tp 1, 1f1b M=2', \
  'run10_loss.dat' using 2:4 with linespoints lw 2 pt 7 ps 0.6 title 'occ.baseline: mlp allreduce, dp 2 x pp 2 x tp 1, 1f1b M=2', \
  'run11_loss.dat' using 2:4 with linespoints lw 2 pt 7 ps 0.6 title 'pipelines.N2: mlp avgpipe, dp 1 x pp 2 x tp 1, 1f1b M=2, 2 pipelines', \
  'run12_loss.dat' using 2:4 with linespoints lw 2 pt 7 ps 0.6 title 'pipelines.N4: mlp avgpipe, dp 1 x pp 2 x tp 1, 1f1b M=2, 4 pipelines', \
  'run13_loss.dat' using 2:4 with linespoints lw 2 pt 7 ps 0.6 title 'pipelines.baseline: mlp allreduce, dp 1 x pp 2 x tp 1, 1f1b M=2'
unset multiplot
set output
}
