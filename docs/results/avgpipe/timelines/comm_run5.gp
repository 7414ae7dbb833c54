# Written by bagpipe report; edit and run `gnuplot comm_run5.gp` in this folder to redraw
# comm_run5.svg and comm_run5.png.
do for [format in "svg png"] {
if (format eq "svg") {
  set terminal svg size 960,720 dynamic noenhanced font 'Helvetica,13' \
    background '#ffffff'
} else {
  set terminal pngcairo size 960,720 noenhanced font 'Helvetica,11' \
    background '#ffffff'
}
set output 'comm_run5.'.format
reset
set grid lc rgb '#dddddd'
set border lc rgb '#444444'
set multiplot layout 2,1 title 'trace_gpipe: gpt allreduce, dp 1 x pp 2 x tp 1, gpipe M=4, net bw=1Gbit,lat=1ms: communication per step and axis'
set key top right opaque
set ylabel 'bytes sent per step, all ranks (MB)'
set yrange [0:*]
plot \
  'run5_steps.dat' using 1:3 with lines lw 1.5 lc rgb '#f28e2b' title 'pp', \
  'run5_steps.dat' using 1:5 with lines lw 1.5 lc rgb '#b07aa1' title 'embed'
set ylabel 'exposed communication per step, rank 0 (ms)'
set xlabel 'step'
plot \
  'run5_steps.dat' using 1:7 with lines lw 1.5 lc rgb '#f28e2b' title 'pp', \
  'run5_steps.dat' using 1:9 with lines lw 1.5 lc rgb '#b07aa1' title 'embed'
unset multiplot
set output
}
