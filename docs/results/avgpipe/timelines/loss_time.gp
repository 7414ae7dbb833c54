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
set title 'training loss against training time'
set xlabel 'training time (s, sum of step times)'
set ylabel 'training loss (nats/byte)'
set key top right opaque
plot \
  'run1_loss.dat' using 2:4 with linespoints lw 2 pt 7 ps 0.6 title 'trace_1f1b: gpt allreduce, dp 1 x pp 2 x tp 1, 1f1b M=4, net bw=1Gbit,lat=1ms', \
  'run2_loss.dat' using 2:4 with linespoints lw 2 pt 7 ps 0.6 title 'trace_avgpipe2: gpt avgpipe, dp 1 x pp 2 x tp 1, 1f1b M=4, 2 pipelines, net bw=1Gbit,lat=1ms', \
  'run3_loss.dat' using 2:4 with linespoints lw 2 pt 7 ps 0.6 title 'trace_avgpipe2afp4: gpt avgpipe, dp 1 x pp 2 x tp 1, afp:4 M=4, 2 pipelines, net bw=1Gbit,lat=1ms', \
  'run4_loss.dat' using 2:4 with linespoints lw 2 pt 7 ps 0.6 title 'trace_avgpipe2nf: gpt avgpipe, dp 1 x pp 2 x tp 1, 1f1b M=4, 2 pipelines, net bw=1Gbit,lat=1ms', \
  'run5_loss.dat' using 2:4 with linespoints lw 2 pt 7 ps 0.6 title 'trace_gpipe: gpt allreduce, dp 1 x pp 2 x tp 1, gpipe M=4, net bw=1Gbit,lat=1ms'
unset multiplot
set output
}
