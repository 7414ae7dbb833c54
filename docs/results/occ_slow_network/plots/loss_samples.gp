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
  'run1_loss.dat' using 3:4 with linespoints lw 2 pt 7 ps 0.6 title 'run001: gpt allreduce, dp 2 x pp 4 x tp 1, 1f1b M=4, net bw=100Mbit,lat=1ms', \
  'run2_loss.dat' using 3:4 with linespoints lw 2 pt 7 ps 0.6 title 'run002: gpt allreduce, dp 2 x pp 4 x tp 1, 1f1b M=4, net bw=100Mbit,lat=1ms', \
  'run3_loss.dat' using 3:4 with linespoints lw 2 pt 7 ps 0.6 title 'run003: gpt allreduce, dp 2 x pp 4 x tp 1, 1f1b M=4, net bw=100Mbit,lat=1ms', \
  'run4_loss.dat' using 3:4 with linespoints lw 2 pt 7 ps 0.6 title 'run004: gpt powersgd, dp 2 x pp 4 x tp 1, 1f1b M=4, net bw=100Mbit,lat=1ms', \
  'run5_loss.dat' using 3:4 with linespoints lw 2 pt 7 ps 0.6 title 'run005: gpt allreduce, dp 2 x pp 4 x tp 1, 1f1b M=4, net bw=100Mbit,lat=1ms', \
  'run6_loss.dat' using 3:4 with linespoints lw 2 pt 7 ps 0.6 title 'run006: gpt powersgd, dp 2 x pp 4 x tp 1, 1f1b M=4, net bw=100Mbit,lat=1ms', \
  'run7_loss.dat' using 3:4 with linespoints lw 2 pt 7 ps 0.6 title 'run007: gpt powersgd, dp 2 x pp 4 x tp 1, 1f1b M=4, net bw=100Mbit,lat=1ms', \
  'run8_loss.dat' using 3:4 with linespoints lw 2 pt 7 ps 0.6 title 'run008: gpt allreduce, dp 2 x pp 4 x tp 1, 1f1b M=4, net bw=100Mbit,lat=1ms'
unset multiplot
set output
}
